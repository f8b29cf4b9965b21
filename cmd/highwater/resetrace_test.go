package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// racedReset runs the reset args and, once, after it has built its commit
// on a head and before it writes it, runs meanwhile: a commit made there
// makes the reset build again on the new head.
func racedReset(t *testing.T, args []string, meanwhile func()) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	raced := false
	env := &environment{stdout: &out, stderr: &errb, getenv: os.Getenv, hook: func(name string) {
		if name == "append-built" && !raced {
			raced = true
			meanwhile()
		}
	}}
	code = execute(context.Background(), env, args)
	if !raced {
		t.Fatalf("%v: the reset never reached the point to race it at: exit %d\n%s%s", args, code, out.String(), errb.String())
	}
	return code, out.String(), errb.String()
}

// mustRun runs a command that must succeed, and returns its output.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := highwater(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// lastCommit is the newest commit line of status --json.
func lastCommit(t *testing.T, dest string) (line struct {
	Seq       int64
	Kind      string
	Watermark string
	Reset     struct {
		OldWatermark string `json:"old_watermark"`
	}
}) {
	t.Helper()
	out := mustRun(t, "status", "--dest", dest, "--model", "items", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return line
}

// TestResetRacingAFullRefreshThatTurnsTheDeleteLogOn: the reset was
// planned on a model without the delete log, so it needed no source; a
// full refresh with the delete log commits before it. On that head the
// model reads the log, so the reset is refused as if it had been asked
// there: exit 2, one line, nothing committed.
func TestResetRacingAFullRefreshThatTurnsTheDeleteLogOn(t *testing.T) {
	db, dest := setupItems(t)
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	mustRun(t, export...)
	pgtest.Exec(t, db, `UPDATE items SET updated_at = now() WHERE id <= 5`)
	mustRun(t, export...)
	mustRun(t, "deletes", "install", "--source", db, "--table", "public.items")
	reset := []string{"reset", "--dest", dest, "--model", "items", "--to-seq", "1", "--reason", "replay"}
	code, out, errOut := racedReset(t, reset, func() {
		mustRun(t, append(append([]string{}, export...), "--full-refresh", "--delete-log")...)
	})
	if code != exitUsage || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "highwater reset: items reads the delete log: give --source") {
		t.Fatalf("reset raced by a full refresh with the delete log: exit %d, want 2 and the line asking for --source\n%s%s", code, out, errOut)
	}
	if c := lastCommit(t, dest); c.Seq != 3 || c.Kind != "full_refresh" {
		t.Fatalf("after the refused reset the head is seq %d (%s), want the full refresh at 3", c.Seq, c.Kind)
	}
}

// TestResetRacingAnExportWithALongerLookback: the reset to VALUE was
// checked on a head whose last export read 30s below its watermark, so
// the next export would read the delete log from VALUE - 30s, which the
// log, pruned 3h30m back, still holds. An export with a lookback of 2h
// commits before the reset: from its head the next export reads from
// VALUE - 2h, which the log was pruned past, so the reset is refused
// there, with nothing committed; a dry run on that head says the same,
// where it passed on the head before.
func TestResetRacingAnExportWithALongerLookback(t *testing.T) {
	db, dest, export := deleteLogLake(t)
	mustRun(t, "deletes", "prune", "--source", db, "--older-than", "3h30m")
	value := pgRows(t, db, `SELECT (now() - interval '3 hours')::text`)[0][0]
	reset := []string{"reset", "--dest", dest, "--model", "items", "--watermark", value, "--reason", "replay", "--source", db}
	dry := append(append([]string{}, reset...), "--dry-run")
	if out := mustRun(t, dry...); !strings.Contains(out, "the lookback of 30s") {
		t.Fatalf("dry run before the race:\n%s", out)
	}
	code, out, errOut := racedReset(t, reset, func() {
		pgtest.Exec(t, db, `UPDATE items SET updated_at = now() WHERE id = 3`)
		mustRun(t, append(append([]string{}, export...), "--lookback", "2h")...)
	})
	const refused = "highwater reset: items: reset refused, the next export would stop: the delete log of public.items was pruned up to "
	if code != exitUsage || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, refused) {
		t.Fatalf("reset raced by an export with a lookback of 2h: exit %d, want 2 and the pruned line\n%s%s", code, out, errOut)
	}
	if c := lastCommit(t, dest); c.Kind != "export" {
		t.Fatalf("after the refused reset the head is seq %d (%s), want the racing export", c.Seq, c.Kind)
	}
	refusedOnce(t, dry, exitUsage, refused)
}

// TestResetCommitsOnTheRacingHead: an export with a lookback of 2h
// commits between the reset's first build and its write; the log holds
// the deletes from there, so the reset commits on top of it, recording
// the racing export's watermark as the old one, and says that the next
// export reads the delete log from VALUE - 2h, as that head makes it.
func TestResetCommitsOnTheRacingHead(t *testing.T) {
	db, dest, export := deleteLogLake(t)
	// The new watermark, and it less the racing export's lookback.
	at := pgRows(t, db, `SELECT v::text, to_char((v - interval '2 hours') AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00'
		FROM (SELECT now() - interval '3 hours' AS v) s`)[0]
	value, from := at[0], at[1]
	before := lastCommit(t, dest)
	var racing struct{ Watermark string }
	reset := []string{"reset", "--dest", dest, "--model", "items", "--watermark", value, "--reason", "replay", "--source", db}
	code, out, errOut := racedReset(t, reset, func() {
		pgtest.Exec(t, db, `UPDATE items SET updated_at = now() WHERE id = 3`)
		if err := json.Unmarshal([]byte(mustRun(t, append(append([]string{}, export...), "--lookback", "2h", "--json")...)), &racing); err != nil {
			t.Fatal(err)
		}
	})
	if code != 0 {
		t.Fatalf("reset: exit %d\n%s%s", code, out, errOut)
	}
	if racing.Watermark == before.Watermark {
		t.Fatalf("the racing export left the watermark at %s", racing.Watermark)
	}
	c := lastCommit(t, dest)
	if c.Kind != "reset" || c.Seq != before.Seq+2 || c.Reset.OldWatermark != racing.Watermark {
		t.Fatalf("the reset committed seq %d (%s) with the old watermark %s, want seq %d with the racing export's %s",
			c.Seq, c.Kind, c.Reset.OldWatermark, before.Seq+2, racing.Watermark)
	}
	if !strings.Contains(out, "watermark "+racing.Watermark+" -> "+c.Watermark) || !strings.Contains(out, "the next export also reads the delete log from "+from+",") {
		t.Fatalf("the reset on the racing head printed\n%s, want the old watermark %s and the delete log read from %s", out, racing.Watermark, from)
	}
}

// TestResetRacingAnotherReset: another reset moves the watermark below
// VALUE between the reset's build and its write; on that head VALUE is no
// longer a move back, so the reset is refused (exit 2), and the racing
// reset stays the head.
func TestResetRacingAnotherReset(t *testing.T) {
	db, dest := setupItems(t)
	mustRun(t, "export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest)
	reset := []string{"reset", "--dest", dest, "--model", "items", "--reason", "replay"}
	code, out, errOut := racedReset(t, append(append([]string{}, reset...), "--watermark", "2020-01-01 00:00:00+00"), func() {
		mustRun(t, append(append([]string{}, reset...), "--watermark", "2010-01-01 00:00:00+00")...)
	})
	if code != exitUsage || strings.Count(errOut, "\n") != 1 ||
		!strings.HasPrefix(errOut, "highwater reset: items: reset refused: 2020-01-01 00:00:00.000000+00 is not below the current watermark 2010-01-01 00:00:00.000000+00") {
		t.Fatalf("reset raced by a reset below it: exit %d, want 2 and the line that says why\n%s%s", code, out, errOut)
	}
	if c := lastCommit(t, dest); c.Seq != 2 || c.Watermark != "2010-01-01 00:00:00.000000+00" {
		t.Fatalf("after the refused reset the head is seq %d at %s, want the racing reset", c.Seq, c.Watermark)
	}
}
