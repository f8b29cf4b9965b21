package main

import (
	"os"
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
