package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// runDirs lists the run directories under a model's _runs/.
func runDirs(t *testing.T, dest, model string) []string {
	t.Helper()
	entries, err := os.ReadDir(strings.TrimPrefix(dest, "file://") + "/" + model + "/_runs")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestVacuumPrunesRuns: every run, a no-change one too, leaves its plan
// under _runs/; vacuum prunes those of runs committed before its
// retention, except the newest export's, whose lookback dedupe reads, and
// the model works on: verify, dedupe and export.
func TestVacuumPrunesRuns(t *testing.T) {
	db, dest := setupItems(t)
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	for range 4 {
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatalf("export: %s", errOut)
		}
	}
	if n := len(runDirs(t, dest, "items")); n != 4 {
		t.Fatalf("%d runs after 4 exports", n)
	}
	time.Sleep(10 * time.Millisecond) // the commits are then older than the retention
	code, out, errOut := highwater(t, "vacuum", "--dest", dest, "--model", "items", "--older-than", "5ms", "--dry-run")
	if code != 0 || strings.Count(out, "/plan.json\n") != 3 || len(runDirs(t, dest, "items")) != 4 {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := highwater(t, "vacuum", "--dest", dest, "--model", "items", "--older-than", "5ms"); code != 0 || strings.Count(out, "/plan.json\n") != 3 {
		t.Fatalf("vacuum: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := len(runDirs(t, dest, "items")); n != 1 {
		t.Fatalf("%d runs left after vacuum, want the newest export's", n)
	}
	for _, args := range [][]string{
		{"verify", "--dest", dest, "--model", "items"},
		{"dedupe", "--dest", dest, "--model", "items"},
		export,
		{"verify", "--dest", dest, "--model", "items"},
	} {
		if code, out, errOut := highwater(t, args...); code != 0 {
			t.Fatalf("%s after vacuum: exit %d\n%s\n%s", args[0], code, out, errOut)
		}
	}
	if n := len(runDirs(t, dest, "items")); n != 3 {
		t.Fatalf("%d runs after dedupe and export, want 3", n)
	}
}

// TestMeasureNoChangeExport times a no-change export at 1, 100 and 1,000
// commits of history, and at 1,000 after a vacuum has pruned the runs'
// metadata. It asserts no duration: it reports them, when
// HIGHWATER_MEASURE=1 (it runs 1,000 exports).
func TestMeasureNoChangeExport(t *testing.T) {
	if os.Getenv("HIGHWATER_MEASURE") == "" {
		t.Skip("set HIGHWATER_MEASURE=1 to measure")
	}
	db, dest := setupItems(t)
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest, "-q"}
	one := func() time.Duration {
		start := time.Now()
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatalf("export: %s", errOut)
		}
		return time.Since(start)
	}
	median := func() time.Duration {
		var ds []time.Duration
		for range 5 {
			ds = append(ds, one())
		}
		slices.Sort(ds)
		return ds[2]
	}
	commits := 0
	for _, at := range []int{1, 100, 1000} {
		for commits < at-1 {
			one()
			commits++
		}
		d := median()
		commits += 5
		t.Logf("no-change export at %d commits of history: median %s (%d run directories)", at, d.Round(time.Millisecond), len(runDirs(t, dest, "items")))
	}
	time.Sleep(10 * time.Millisecond)
	if code, _, errOut := highwater(t, "vacuum", "--dest", dest, "--model", "items", "--older-than", "5ms", "-q"); code != 0 {
		t.Fatalf("vacuum: %s", errOut)
	}
	d := median()
	t.Logf("no-change export at %d commits after vacuum: median %s (%d run directories)", commits, d.Round(time.Millisecond), len(runDirs(t, dest, "items")))
}
