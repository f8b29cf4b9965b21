package main

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestResetWithThePrunedDeleteLog: a reset of a model with the delete log
// says that the next export reads the log again from the new watermark
// minus the lookback; with the log pruned past it, that export stops with
// one line and commits nothing.
func TestResetWithThePrunedDeleteLog(t *testing.T) {
	db, dest := setupItems(t)
	if code, _, errOut := highwater(t, "deletes", "install", "--source", db, "--table", "public.items"); code != 0 {
		t.Fatal(errOut)
	}
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", dest, "--delete-log"}
	for range 2 {
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatal(errOut)
		}
		pgtest.Exec(t, db, `DELETE FROM items WHERE id <= 42`)
	}
	if code, _, errOut := highwater(t, "deletes", "prune", "--source", db, "--older-than", "1us"); code != 0 {
		t.Fatal(errOut)
	}
	reset := []string{"reset", "--dest", dest, "--model", "items", "--to-seq", "1", "--reason", "replay"}
	for _, args := range [][]string{append(reset, "--dry-run"), reset} {
		code, out, errOut := highwater(t, args...)
		if code != 0 || !strings.Contains(out, "the next export also reads the delete log from ") ||
			!strings.Contains(out, "it stops if the log was pruned past that (highwater deletes status shows the horizon)") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	code, _, errOut := highwater(t, export...)
	// The log lines go to stderr too: one error line, the last.
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code == 0 || strings.Count(errOut, "highwater export:") != 1 || !strings.HasPrefix(lines[len(lines)-1], "highwater export: the delete log of public.items was pruned up to ") {
		t.Fatalf("the export after the reset: exit %d: %q", code, errOut)
	}
	if _, out, _ := highwater(t, "status", "--dest", dest, "--json"); strings.Count(out, "\n") != 3 {
		t.Fatalf("the stopped export committed:\n%s", out)
	}
}
