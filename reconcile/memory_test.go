package reconcile_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/highwater-dev/highwater/reconcile"
)

// TestMemoryLimit reconciles 2M rows, with differences, in a subprocess
// under --memory-limit 64MiB and checks its peak RSS, its counts and that
// it did not warn of a limit it cannot keep; and again under 54MiB, which
// the binary's own pages, 32-42 MiB resident at the start, leave too
// little unless the ones not in use are dropped. (The process reaches
// 41-47 MiB before the reconcile starts: a lower limit would measure the
// start of the process.)
func TestMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("2M rows")
	}
	const n = 2_000_000
	l := newLake(t, itemsTable[:len(`CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, price numeric(12,2));`)],
		fmt.Sprintf(`INSERT INTO items SELECT i, '2026-01-01'::timestamptz + i * interval '1 ms', 'name ' || i, i / 100.0 FROM generate_series(1, %d) i`, n),
		// Without statistics the planner sorts the whole table for every
		// keyset page, which makes the export take minutes.
		`ANALYZE items`)
	l.export()
	l.exec(`UPDATE items SET name = 'unseen' WHERE id % 100000 = 7`,
		`DELETE FROM items WHERE id % 200000 = 11`,
		`INSERT INTO items VALUES (0, '2000-01-01', 'backdated', 0)`)
	for _, limit := range []int64{64 << 20, 54 << 20} {
		res, peak := reconcileUnder(t, l, limit)
		r := res.Report
		t.Logf("limit %d MiB: %d source and %d lake rows, peak RSS %.1f MiB", limit>>20, res.SourceRows, res.LakeRows, float64(peak)/(1<<20))
		if r.Matched != n-20-10 || r.Changed != 20 || r.Extra != 10 || r.Missing != 1 {
			t.Fatalf("limit %d MiB: report: %+v", limit>>20, r)
		}
		if peak > limit {
			t.Errorf("peak RSS %d bytes is over the limit of %d", peak, limit)
		}
		if len(res.Warnings) > 0 {
			t.Errorf("limit %d MiB: warnings %q", limit>>20, res.Warnings)
		}
	}
}

// reconcileUnder reconciles l's model in a subprocess under a memory
// limit of limit bytes and returns its result and its peak RSS.
func reconcileUnder(t *testing.T, l *lake, limit int64) (reconcile.Result, int64) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memhelper")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/memhelper").CombinedOutput(); err != nil {
		t.Fatalf("build memhelper: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, l.db, l.dest, l.model, "public.items", fmt.Sprint(limit))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reconcile subprocess: %v", err)
	}
	var got struct {
		Result  reconcile.Result
		PeakRSS int64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reconcile subprocess said %q: %v", out, err)
	}
	return got.Result, got.PeakRSS
}
