package dedupe_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/laketest"
	"github.com/highwater-dev/highwater/internal/synth"
)

// A committed watermark or stuck-transaction floor that dedupe cannot read
// stops it before it commits: it bounds which tombstones may be dropped,
// and a guess could drop one that an older version of its key still needs.
func TestCorruptWatermarkStopsDedupe(t *testing.T) {
	const bad = "2026-13-01 00:00:00.000000+00"
	for _, field := range []string{"watermark", "from_floor"} {
		t.Run(field, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			d := openDest(t, "file://"+dir)
			lake, err := synth.New(d, "items")
			if err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				if _, err := lake.Export(ctx, 100, func(i int, r *synth.Row) {
					*r = synth.Row{ID: int64(i), UpdatedAt: t0 + int64(round*1000+i), Name: fmt.Sprint("v", round), Deleted: i%10 == 0}
				}); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "items", "_manifests", fmt.Sprintf("%020d.json", 2))
			laketest.EditJSON(t, path, func(doc map[string]any) { doc[field] = bad })
			_, err = dedupe.Run(ctx, d, d.ObjectURL, dedupe.Options{Model: "items"})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("read the committed watermark %q", bad)) {
				t.Fatalf("dedupe over a corrupt %s: %v", field, err)
			}
			if st := readState(t, d, "items"); st.Seq != 2 {
				t.Fatalf("dedupe committed: seq %d", st.Seq)
			}
		})
	}
}
