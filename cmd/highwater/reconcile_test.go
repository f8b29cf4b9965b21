package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestReconcileCommand runs reconcile from the command line: exit 3 with
// the counts and keys of each kind, the --json shape (a golden file), a
// repair, a dedupe, and exit 0.
func TestReconcileCommand(t *testing.T) {
	db, dest := setupItems(t)
	model := []string{"--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	if code, _, errOut := highwater(t, append([]string{"export"}, model...)...); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	code, out, errOut := highwater(t, append([]string{"reconcile"}, model...)...)
	if code != 0 || !strings.Contains(out, "items: equal to the source: 500 keys matched") {
		t.Fatalf("reconcile of a fresh export: exit %d\n%s%s", code, out, errOut)
	}
	pgtest.Exec(t, db,
		`UPDATE items SET name = 'unseen' WHERE id IN (4, 2)`,
		`INSERT INTO items VALUES (1000, '2001-01-01', 'backdated')`,
		`DELETE FROM items WHERE id BETWEEN 100 AND 111`)
	code, out, errOut = highwater(t, append([]string{"reconcile"}, model...)...)
	want := `items: differs from the source (keys and values): 486 matched, 1 missing, 12 extra, 2 changed; committed seq 3
  missing: 1000
  extra:   100, 101, 102, 103, 104, 105, 106, 107, 108, 109, ... (2 more)
  changed: 2, 4
`
	if code != exitDifferences || out != want {
		t.Fatalf("reconcile: exit %d, want 3\n%s\nwant\n%s\n%s", code, out, want, errOut)
	}
	if !strings.Contains(errOut, "1 missing, 12 extra, 2 changed keys") {
		t.Fatalf("stderr: %q", errOut)
	}
	code, out, errOut = highwater(t, append([]string{"reconcile", "--json"}, model...)...)
	if code != exitDifferences {
		t.Fatalf("reconcile --json: exit %d: %s", code, errOut)
	}
	checkGolden(t, filepath.Join("testdata", "json", "reconcile-differ.golden"), normalizeJSON(out, strings.TrimPrefix(dest, "file://")))

	code, out, errOut = highwater(t, append([]string{"reconcile", "--repair"}, model...)...)
	if code != exitDifferences || !strings.Contains(out, "repaired: 3 rows written again, 12 tombstones, in 1 files") {
		t.Fatalf("reconcile --repair: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := highwater(t, "dedupe", "--dest", dest, "--model", "items"); code != 0 {
		t.Fatalf("dedupe: %s", errOut)
	}
	code, out, errOut = highwater(t, append([]string{"reconcile"}, model...)...)
	if code != 0 || !strings.Contains(out, "equal to the source: 489 keys matched") {
		t.Fatalf("reconcile after repair and dedupe: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items")
	if code != 0 || !strings.Contains(out, "note: items: last proven equal to the source at ") || !strings.Contains(out, "(seq 7, 489 keys)") {
		t.Fatalf("status: %s", out)
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--json")
	if code != 0 || !strings.Contains(out, `"kind":"reconcile"`) || !strings.Contains(out, `"reconcile":{"matched":486,"missing":1,"extra":12,"changed":2,`) {
		t.Fatalf("status --json: %s", out)
	}
}

func TestReconcileUsage(t *testing.T) {
	db, dest := setupItems(t)
	model := []string{"--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	for _, args := range [][]string{
		{"--repair", "--keys-only"},
		{"--memory-limit", "lots"},
		{"--memory-limit", "1MiB"},
		{"--page-rows", "0"},
		{"--primary-key", ""},
	} {
		code, _, errOut := highwater(t, append(append([]string{"reconcile"}, model...), args...)...)
		if code != exitUsage || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, want 2: %q", args, code, errOut)
		}
	}
	// Nothing was created.
	if entries, _ := os.ReadDir(strings.TrimPrefix(dest, "file://")); len(entries) != 0 {
		t.Fatalf("a usage error left %d entries in the lake", len(entries))
	}
}

// TestReconcileFanOut reconciles the tenants of a config's model: each
// instance prints its own result, and the exit status is 3 when an
// instance differs (and only differs).
func TestReconcileFanOut(t *testing.T) {
	db := setupOrgs(t, []string{"a", "b", "c"})
	dest := "file://" + t.TempDir() + "/lake/{tenant}"
	cfg := writeConfig(t, db, dest, "    tenants: [a, b, c]")
	if code, out, errOut := highwater(t, "export", "--config", cfg); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := highwater(t, "reconcile", "--config", cfg, "--parallel", "2")
	if code != 0 || strings.Count(out, "equal to the source") != 3 || !strings.Contains(out, "summary: 3 done, 0 failed") {
		t.Fatalf("reconcile: exit %d\n%s%s", code, out, errOut)
	}
	pgtest.Exec(t, db, `UPDATE events SET v = v + 1 WHERE org = 'b' AND id = (SELECT min(id) FROM events WHERE org = 'b')`)
	code, out, errOut = highwater(t, "reconcile", "--config", cfg, "--json")
	if code != exitDifferences || strings.Count(out, `"equal":true`) != 2 || strings.Count(out, `"equal":false`) != 1 ||
		!strings.Contains(out, `"tenant":"b"`) || !strings.Contains(out, `"changed":1,`) {
		t.Fatalf("reconcile after a change in b: exit %d\n%s%s", code, out, errOut)
	}
}
