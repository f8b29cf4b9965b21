package dedupe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/synth"
)

// buildHelper compiles the one-dedupe command whose RSS is measured: the
// test binary itself carries DuckDB, whose pages alone take 30 MiB.
func buildHelper(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memhelper")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/memhelper")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build memhelper: %v\n%s", err, out)
	}
	return bin
}

// TestMemoryLimit dedupes an input several times the memory limit in a
// subprocess and checks its peak RSS.
func TestMemoryLimit(t *testing.T) {
	// The limit covers the whole process: the helper's binary alone keeps
	// 35-45 MiB of pages resident (it links every object-store SDK), so
	// 64 MiB leaves the dedupe about 20 MiB.
	const limit = 64 << 20
	dir := t.TempDir()
	if keep := os.Getenv("HIGHWATER_DEDUPE_KEEP"); keep != "" {
		dir = keep // to profile the helper by hand
	}
	d := openDest(t, "file://"+dir)
	lake, err := synth.New(d, "items")
	if err != nil {
		t.Fatal(err)
	}
	lake.RowGroupRows = 50_000
	lake.TargetFileBytes = 8 << 20
	ctx := context.Background()
	// 3.2M versions of ~85 bytes decoded: over four times the limit.
	const n = 2_560_000
	if _, err := lake.Export(ctx, n, func(i int, r *synth.Row) {
		*r = synth.Row{ID: int64(i * 7919 % n), UpdatedAt: t0 + int64(i), Name: fmt.Sprintf("%050d", i), Price: int64(i)}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := lake.Export(ctx, n/4, func(i int, r *synth.Row) {
		*r = synth.Row{ID: int64(i * 4), UpdatedAt: t0 + n + int64(i), Name: fmt.Sprintf("new%047d", i), Price: -int64(i)}
	}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildHelper(t), "file://"+dir, "items", fmt.Sprint(limit), fmt.Sprint(16<<20))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dedupe subprocess: %v", err)
	}
	var got struct {
		Result  dedupe.Result
		PeakRSS int64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("dedupe subprocess said %q: %v", out, err)
	}
	res := got.Result
	// Not ProcessState's Maxrss: it counts this test process's own RSS,
	// which the child shares until it execs (see memhelper).
	rss := got.PeakRSS
	spilled := res.InputRows * 85 // decoded bytes per row, roughly
	t.Logf("limit %d MiB: %d rows (~%d MiB decoded) in %d files -> %d rows, %d sort runs spilled, peak RSS %.1f MiB",
		limit>>20, res.InputRows, spilled>>20, res.InputFiles, res.OutputRows, res.SortRuns, float64(rss)/(1<<20))
	if res.OutputRows != n || res.SortRuns == 0 {
		t.Fatalf("result: %+v", res)
	}
	if rss > limit {
		t.Fatalf("peak RSS %d bytes is over the limit of %d", rss, limit)
	}
	if got := scalar(t, duck(t, d, "items", "SELECT count(*) FILTER (WHERE name LIKE 'new%') FROM lake")); got != fmt.Sprint(n/4) {
		t.Fatalf("%s rows have the newer version, want %d", got, n/4)
	}
}
