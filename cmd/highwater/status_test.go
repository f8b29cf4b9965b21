package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestStatusFits120Columns checks the default table's width with a long
// model name, --wide and --limit.
func TestStatusFits120Columns(t *testing.T) {
	db, dest := setupItems(t)
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", dest, "--model", "items_with_a_rather_long_name"}
	for i := 0; i < 3; i++ {
		if code, _, errOut := highwater(t, args...); code != 0 {
			t.Fatal(errOut)
		}
		pgtest.Exec(t, db, `UPDATE items SET updated_at = now() WHERE id <= 5`)
	}
	code, out, errOut := highwater(t, "status", "--dest", dest)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 4 {
		t.Fatalf("status: exit %d: %s%s", code, out, errOut)
	}
	for _, l := range lines {
		if len([]rune(l)) > 120 {
			t.Errorf("a line of %d columns: %q", len([]rune(l)), l)
		}
	}
	if n := strings.Count(out, "items_with_a_rather_long_name"); n != 1 {
		t.Errorf("the model is named %d times:\n%s", n, out)
	}
	_, wide, _ := highwater(t, "status", "--dest", dest, "--wide")
	var first statusLine
	_, js, _ := highwater(t, "status", "--dest", dest, "--json", "--limit", "1")
	if err := json.Unmarshal([]byte(js), &first); err != nil || strings.Count(js, "\n") != 1 || first.Seq != 3 {
		t.Fatalf("status --json --limit 1: %v: %s", err, js)
	}
	if !strings.Contains(wide, first.RunID) || strings.Count(wide, "items_with_a_rather_long_name") != 3 {
		t.Errorf("--wide does not show every column:\n%s", wide)
	}
	if _, out, _ := highwater(t, "status", "--dest", dest, "--limit", "1"); strings.Count(out, "\n") != 2 {
		t.Errorf("--limit 1 printed:\n%s", out)
	}
}

// TestStatusShowsDeletes: the tombstones a commit wrote are in the table,
// in --wide and in --json.
func TestStatusShowsDeletes(t *testing.T) {
	db, dest := setupItems(t)
	if code, _, errOut := highwater(t, "deletes", "install", "--source", db, "--table", "public.items"); code != 0 {
		t.Fatal(errOut)
	}
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", dest, "--delete-log"}
	if code, _, errOut := highwater(t, args...); code != 0 {
		t.Fatal(errOut)
	}
	pgtest.Exec(t, db, `DELETE FROM items WHERE id <= 42`)
	if code, _, errOut := highwater(t, args...); code != 0 {
		t.Fatal(errOut)
	}
	_, out, _ := highwater(t, "status", "--dest", dest)
	if !strings.Contains(out, "ROWS/DEL") || !strings.Contains(out, " 0/42 ") {
		t.Errorf("status does not show the 42 tombstones:\n%s", out)
	}
	_, wide, _ := highwater(t, "status", "--dest", dest, "--wide")
	if !strings.Contains(wide, "DELETES") {
		t.Errorf("status --wide has no DELETES column:\n%s", wide)
	}
	var last statusLine
	_, js, _ := highwater(t, "status", "--dest", dest, "--json", "--limit", "1")
	if err := json.Unmarshal([]byte(js), &last); err != nil || last.Metrics == nil || last.Metrics.DeletesTransferred != 42 {
		t.Fatalf("status --json: %v: %s", err, js)
	}
}
