package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestResetCommand: the refusals (exit 2, nothing committed), a dry run,
// the reset's audit fields in status and status --json, and the replay.
func TestResetCommand(t *testing.T) {
	db, dest := setupItems(t)
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest, "--json"}
	code, out, errOut := highwater(t, export...)
	if code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	var first struct{ Watermark string }
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatal(err)
	}
	reset := []string{"reset", "--dest", dest, "--model", "items"}
	for _, args := range [][]string{
		{"--to-seq", "1"}, // no reason
		{"--reason", "x"}, // no target
		{"--to-seq", "1", "--watermark", first.Watermark, "--reason", "x"},
		{"--to-seq", "1", "--reason", "x"}, // the current watermark
		{"--watermark", first.Watermark, "--reason", "x"},
		{"--watermark", "2999-01-01 00:00:00+00", "--reason", "x"},
		{"--watermark", "soon", "--reason", "x"},
		{"--to-seq", "7", "--reason", "x"},
	} {
		code, _, errOut := highwater(t, append(reset, args...)...)
		if code != exitUsage || strings.Count(errOut, "\n") != 1 {
			t.Errorf("reset %v: exit %d, want 2: %q", args, code, errOut)
		}
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--json")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("a refused reset committed:\n%s", out)
	}
	to := "2000-01-01 00:00:00+00"
	code, out, errOut = highwater(t, append(reset, "--watermark", to, "--reason", "replay the backdated import", "--dry-run")...)
	if code != 0 || !strings.Contains(out, "would reset the watermark from "+first.Watermark+" to 2000-01-01 00:00:00.000000+00") ||
		!strings.Contains(out, "read modified-at from 1999-12-31 23:59:30.000000+00 (the new watermark minus the lookback of 30s)") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = highwater(t, append(reset, "--watermark", to, "--reason", "replay the backdated import")...)
	if code != 0 || !strings.Contains(out, "items: committed seq 2 (reset): watermark "+first.Watermark+" -> 2000-01-01 00:00:00.000000+00") {
		t.Fatalf("reset: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items")
	if code != 0 || !strings.Contains(out, `seq 2 reset the watermark from `+first.Watermark+` to 2000-01-01 00:00:00.000000+00: "replay the backdated import" (by `) {
		t.Fatalf("status:\n%s", out)
	}
	if code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--json"); code != 0 {
		t.Fatalf("status --json: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var line struct {
		Kind, Reason, Watermark string
		Reset                   struct{ User, Host string } `json:"reset"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Kind != "reset" || line.Reason != "replay the backdated import" || line.Watermark != "2000-01-01 00:00:00.000000+00" || line.Reset.User == "" || line.Reset.Host == "" {
		t.Fatalf("status --json: %s", lines[len(lines)-1])
	}
	// The replay reads every row again: all are stamped after 2000.
	code, out, errOut = highwater(t, export...)
	if code != 0 || !strings.Contains(out, `"rows_transferred":500`) || !strings.Contains(out, `"from":"1999-12-31 23:59:30.000000+00"`) {
		t.Fatalf("export after the reset: exit %d\n%s%s", code, out, errOut)
	}
}
