package export_test

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
)

// TestNoChangeReadsTheLogOnce: an export reads the state to plan and again
// to commit; the second read lists what is new and reads no commit or
// checkpoint the first one read. Counted on logs with 1 commit (no state
// checkpoint) and with 35 commits since the last checkpoint.
func TestNoChangeReadsTheLogOnce(t *testing.T) {
	for _, n := range []int{1, 85} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			l, c := noChangeOnHistory(t, n)
			dir := l.model + "/_manifests/"
			log := 0
			gets := c.GetsByKey()
			for _, key := range slices.Sorted(maps.Keys(gets)) {
				name, ok := strings.CutPrefix(key, dir)
				if !ok || !strings.HasSuffix(name, ".json") || path.Base(name) != name {
					continue
				}
				log += gets[key]
				if gets[key] > 1 {
					t.Errorf("%s read %d times", key, gets[key])
				}
			}
			t.Logf("reads of the log's commits and checkpoints: %d", log)
		})
	}
}
