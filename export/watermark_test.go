package export_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/laketest"
)

func (l *lake) commitPath(seq int) string {
	return filepath.Join(l.dir, l.model, "_manifests", fmt.Sprintf("%020d.json", seq))
}

// A watermark the run cannot read stops it before it commits, whichever
// rule reads it: the lookback's from, the stuck-transaction floor, the
// never-backwards rule at commit, and the bounds the rows are counted
// against. Guessing instead could skip rows or move the watermark back.
func TestCorruptWatermarkStopsExport(t *testing.T) {
	const bad = "2026-13-01 00:00:00.000000+00"
	setWatermark := func(doc map[string]any) { doc["watermark"] = bad }
	for _, tc := range []struct {
		name    string
		corrupt func(l *lake) // after the first commit
		during  string        // or at this failpoint of the second run
	}{
		{name: "watermark", corrupt: func(l *lake) { laketest.EditJSON(t, l.commitPath(1), setWatermark) }},
		{name: "from_floor", corrupt: func(l *lake) {
			laketest.EditJSON(t, l.commitPath(1), func(doc map[string]any) { doc["from_floor"] = bad })
		}},
		{name: "watermark at commit", during: "before-commit"},
		{name: "previous watermark of a resumed plan", corrupt: func(l *lake) {
			l.exportCrashing(l.options(), "after-plan", 1)
			plans, err := filepath.Glob(filepath.Join(l.dir, l.model, "_runs", "*", "plan.json"))
			if err != nil || len(plans) != 2 {
				t.Fatalf("plans %v, %v", plans, err)
			}
			laketest.EditJSON(t, plans[1], func(doc map[string]any) { doc["previous_watermark"] = bad })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'n', g FROM generate_series(1, 10) g`)
			l.mustExport(l.options())
			l.exec(`UPDATE items SET updated_at = now() WHERE id = 1`)
			opts := l.options()
			if tc.corrupt != nil {
				tc.corrupt(l)
			}
			if tc.during != "" {
				opts.Failpoint = func(name string) {
					if name == tc.during {
						laketest.EditJSON(t, l.commitPath(1), setWatermark)
					}
				}
			}
			_, err := l.export(opts)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("read the committed watermark %q", bad)) {
				t.Fatalf("export over a corrupt %s: %v", tc.name, err)
			}
			if _, err := os.Stat(l.commitPath(2)); !os.IsNotExist(err) {
				t.Fatalf("the run committed: %v", err)
			}
		})
	}
}
