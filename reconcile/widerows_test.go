package reconcile_test

import (
	"fmt"
	"testing"

	"github.com/highwater-dev/highwater/export"
)

// TestWideRowsMemory reconciles rows of 192 KiB each, exported in one row
// group, in a subprocess under --memory-limit 96MiB and checks its peak
// RSS: the lake's reader must hold a number of rows' values that the
// limit bounds, not a fixed count of rows whatever their width.
func TestWideRowsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("200 MiB of rows")
	}
	const limit = 96 << 20
	const n = 1100
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, body text)`,
		fmt.Sprintf(`INSERT INTO items SELECT i, now() - interval '1 hour', repeat(md5(i::text), 6144) FROM generate_series(1, %d) i`, n))
	// Row groups as large as an export may make them (--row-group-size).
	ctx, cancel := l.ctx()
	defer cancel()
	src, d := l.open(ctx)
	if _, err := export.Run(ctx, src, d, d.ObjectURL, export.Options{Model: l.model, Source: l.spec, RowGroupBytes: 512 << 20}); err != nil {
		t.Fatalf("export: %v", err)
	}
	l.exec(`UPDATE items SET body = body || 'x' WHERE id = 500`)
	res, peak := reconcileUnder(t, l, limit)
	r := res.Report
	t.Logf("limit %d MiB: peak RSS %.1f MiB", limit>>20, float64(peak)/(1<<20))
	if r.Matched != n-1 || r.Changed != 1 || r.Extra != 0 || r.Missing != 0 {
		t.Fatalf("report: %+v", r)
	}
	if peak > limit {
		t.Fatalf("peak RSS %d bytes is over the limit of %d", peak, limit)
	}
}
