package dedupe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
// subprocess and checks its peak RSS: under the tightest limit the helper
// can keep, whatever its binary's resident pages (30-46 MiB, as the page
// cache has them), and under one that gives it two workers, whose row
// groups are encoded at once. go test -cpu 1,2,4 varies the first's cores.
func TestMemoryLimit(t *testing.T) {
	base := t.TempDir()
	if keep := os.Getenv("HIGHWATER_DEDUPE_KEEP"); keep != "" {
		base = keep // to profile the helper by hand
	}
	d := openDest(t, "file://"+base)
	lake, err := synth.New(d, "items")
	if err != nil {
		t.Fatal(err)
	}
	lake.RowGroupRows = 50_000
	lake.TargetFileBytes = 8 << 20
	ctx := context.Background()
	// 3.2M versions of ~85 bytes decoded: several times the limit.
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
	helper := buildHelper(t)
	for _, c := range []struct {
		name string
		over int64 // over the least limit the helper can keep
		// procs is the helper's GOMAXPROCS: more than the machine has
		// for two workers, so that they are scheduled as under load.
		procs   int
		workers bool
	}{
		{"tightest", 2 << 20, runtime.GOMAXPROCS(0), false},
		{"two workers", 56 << 20, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(helper, "file://"+dir, "items", fmt.Sprintf("+%d", c.over), fmt.Sprint(16<<20))
			cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", c.procs))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("dedupe subprocess: %v", err)
			}
			var got struct {
				Result  dedupe.Result
				Limit   int64
				PeakRSS int64
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("dedupe subprocess said %q: %v", out, err)
			}
			res := got.Result
			// Not ProcessState's Maxrss: it counts this test process's own
			// RSS, which the child shares until it execs (see memhelper).
			rss := got.PeakRSS
			decoded := res.InputRows * 85 // bytes per row, roughly
			t.Logf("limit %.1f MiB: %d rows (~%d MiB decoded) in %d files -> %d rows in %d files, %d sort runs spilled, %d row groups at once, peak RSS %.1f MiB",
				float64(got.Limit)/(1<<20), res.InputRows, decoded>>20, res.InputFiles, res.OutputRows, res.OutputFiles, res.SortRuns, res.RowGroupsAtOnce, float64(rss)/(1<<20))
			if res.OutputRows != n || res.SortRuns == 0 || decoded <= got.Limit {
				t.Fatalf("result: %+v", res)
			}
			if c.workers && res.RowGroupsAtOnce < 2 {
				t.Fatalf("%d row groups were encoded at once, want several", res.RowGroupsAtOnce)
			}
			if rss > got.Limit {
				t.Fatalf("peak RSS %d bytes is over the limit of %d", rss, got.Limit)
			}
			dd := openDest(t, "file://"+dir)
			if got := scalar(t, duck(t, dd, "items", "SELECT count(*) FILTER (WHERE name LIKE 'new%') FROM lake")); got != fmt.Sprint(n/4) {
				t.Fatalf("%s rows have the newer version, want %d", got, n/4)
			}
		})
	}
}
