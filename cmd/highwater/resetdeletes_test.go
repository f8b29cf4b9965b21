package main

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// deleteLogLake is a lake of items exported twice with the delete log,
// with deletes before each run, and the arguments of its export.
func deleteLogLake(t *testing.T) (db, dest string, export []string) {
	t.Helper()
	db, dest = setupItems(t)
	if code, _, errOut := highwater(t, "deletes", "install", "--source", db, "--table", "public.items"); code != 0 {
		t.Fatal(errOut)
	}
	export = []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", dest, "--delete-log"}
	for i := range 2 {
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatal(errOut)
		}
		pgtest.Exec(t, db, `DELETE FROM items WHERE id % 10 = `+string(rune('1'+i)))
	}
	return db, dest, export
}

// commits counts the commits of the lake's one model.
func commits(t *testing.T, dest string) int {
	t.Helper()
	code, out, errOut := highwater(t, "status", "--dest", dest, "--model", "items", "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	return strings.Count(out, "\n") - 1 // the model's line leads
}

// refusedOnce checks that a command failed with exit code want and one
// error line, the last, that starts with prefix and holds no secret.
func refusedOnce(t *testing.T, args []string, want int, prefix string) {
	t.Helper()
	code, out, errOut := highwater(t, args...)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != want || strings.Count(errOut, "highwater reset:") != 1 || !strings.HasPrefix(lines[len(lines)-1], prefix) {
		t.Fatalf("%v: exit %d, want %d and a last line starting %q:\n%s%s", args, code, want, prefix, out, errOut)
	}
	if strings.Contains(errOut+out, secret) {
		t.Fatalf("%v printed the source's password:\n%s%s", args, out, errOut)
	}
}

// TestResetChecksTheDeleteLog: a reset of a model with the delete log
// needs the source, and is refused there, with nothing committed, when
// the next export would stop: the log pruned past the replay's start, a
// TRUNCATE since the watermark, or another source than the model's. A
// reset the log can serve commits, and the export after it reads the
// replayed deletes again.
func TestResetChecksTheDeleteLog(t *testing.T) {
	db, dest, export := deleteLogLake(t)
	reset := []string{"reset", "--dest", dest, "--model", "items", "--to-seq", "1", "--reason", "replay"}
	withSource := append(append([]string{}, reset...), "--source", db)
	want := commits(t, dest)

	for _, args := range [][]string{reset, append(append([]string{}, reset...), "--dry-run")} {
		refusedOnce(t, args, 2, "highwater reset: items reads the delete log: give --source")
	}
	other := pg.NewDatabase(t)
	refusedOnce(t, append(append([]string{}, reset...), "--source", withPassword(other, secret)), 2,
		"highwater reset: items: reset refused: the destination's state belongs to another model: the source is system ")
	if got := commits(t, dest); got != want {
		t.Fatalf("the refused resets committed: %d commits, want %d", got, want)
	}

	// A log that holds the replayed interval: the reset commits, and the
	// next export writes the tombstones of both earlier deletes again.
	code, out, errOut := highwater(t, append(append([]string{}, withSource...), "--dry-run")...)
	if code != 0 || !strings.Contains(out, "the next export also reads the delete log from ") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := highwater(t, withSource...); code != 0 {
		t.Fatalf("reset: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := highwater(t, export...); code != 0 {
		t.Fatalf("the export after the reset: %s", errOut)
	}
	_, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--json")
	if last := strings.Split(strings.TrimSpace(out), "\n"); !strings.Contains(last[len(last)-1], `"deletes_transferred":100`) {
		t.Fatalf("the export after the reset did not read the 100 replayed deletes again:\n%s", out)
	}

	// The log pruned past the replay's start.
	if code, _, errOut := highwater(t, "deletes", "prune", "--source", db, "--older-than", "1us"); code != 0 {
		t.Fatal(errOut)
	}
	want = commits(t, dest)
	for _, args := range [][]string{withSource, append(append([]string{}, withSource...), "--dry-run")} {
		refusedOnce(t, args, 2, "highwater reset: items: reset refused, the next export would stop: the delete log of public.items was pruned up to ")
	}
	if got := commits(t, dest); got != want {
		t.Fatalf("the refused resets committed: %d commits, want %d", got, want)
	}
}

// TestResetAfterATruncate: a TRUNCATE since the watermark left no entry
// per row, so no replay can bring its deletes back: the reset is refused.
func TestResetAfterATruncate(t *testing.T) {
	db, dest, _ := deleteLogLake(t)
	pgtest.Exec(t, db, `TRUNCATE items`)
	want := commits(t, dest)
	refusedOnce(t, []string{"reset", "--dest", dest, "--model", "items", "--to-seq", "1", "--reason", "replay", "--source", db}, 2,
		"highwater reset: items: reset refused, the next export would stop: the delete log of public.items records a TRUNCATE at ")
	if got := commits(t, dest); got != want {
		t.Fatalf("the refused reset committed: %d commits, want %d", got, want)
	}
}
