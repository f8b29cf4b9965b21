package main

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestBlindBoundShown: an export by a role without pg_read_all_stats says
// on stderr that only the lookback protects late commits, and status
// shows the fallback bound of every such commit.
func TestBlindBoundShown(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db, `DO $$ BEGIN CREATE ROLE hw_cli_blind LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`GRANT SELECT ON items TO hw_cli_blind`)
	blind := strings.Replace(db, "postgres:"+secret+"@", "hw_cli_blind:"+secret+"@", 1)
	args := []string{"export", "--source", blind, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	for run := 1; run <= 2; run++ {
		code, _, errOut := highwater(t, args...)
		if code != 0 {
			t.Fatalf("export %d: exit %d: %s", run, code, errOut)
		}
		if !strings.Contains(errOut, "hw_cli_blind lacks pg_read_all_stats") {
			t.Fatalf("export %d said nothing of the blind bound on stderr:\n%s", run, errOut)
		}
	}
	code, out, _ := highwater(t, "status", "--dest", dest, "--model", "items")
	if code != 0 || !strings.Contains(out, "note: items: 2 commits with upper bound fallback_lookback") {
		t.Fatalf("status does not note the fallback bound of both commits: exit %d\n%s", code, out)
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--wide")
	if code != 0 || strings.Count(out, "fallback_lookback") != 2 {
		t.Fatalf("status does not show the fallback bound of both commits: exit %d\n%s", code, out)
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--json")
	if code != 0 || strings.Count(out, `lacks pg_read_all_stats`) < 2 {
		t.Fatalf("status --json does not show why: %s", out)
	}
	assertNoSecret(t, dest)
}
