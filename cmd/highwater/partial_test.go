package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestMultiModelFailureNamesCommitted runs a config of three models whose
// second fails: the other two commit, and the last line of stderr, the
// one scripts read, names those that committed and not the failed one.
func TestMultiModelFailureNamesCommitted(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db, `CREATE TABLE other (k text PRIMARY KEY, changed timestamptz)`, `INSERT INTO other VALUES ('a', now())`)
	t.Setenv("HW_PARTIAL_SOURCE", db)
	cfg := filepath.Join(t.TempDir(), "highwater.yaml")
	if err := os.WriteFile(cfg, []byte(`source: ${HW_PARTIAL_SOURCE}
dest: `+dest+`
models:
  - {name: items, table: items, primary_key: id, modified_at: updated_at}
  - {name: broken, table: nowhere, primary_key: id, modified_at: updated_at}
  - {name: other, table: other, primary_key: k, modified_at: changed}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"export", "--config", cfg}, {"export", "--config", cfg, "--parallel", "3"}, {"export", "--config", cfg, "--json"}} {
		code, out, errOut := highwater(t, args...)
		last := lastLine(errOut)
		if code != exitFailed || !strings.Contains(last, "1 of 3 model instances failed") || !strings.Contains(last, "first: broken: ") {
			t.Fatalf("%q: exit %d\n%s\n%s", args, code, out, errOut)
		}
		_, committed, ok := strings.Cut(last, "committed: ")
		if !ok || committed != "items, other" {
			t.Fatalf("%q: the last line does not name the models that committed (items, other): %s", args, last)
		}
	}
	// Nothing ran: nothing is named as committed.
	pgtest.Exec(t, db, `DROP TABLE other`, `DROP TABLE items`)
	code, _, errOut := highwater(t, "export", "--config", cfg)
	if last := lastLine(errOut); code != exitFailed || !strings.Contains(last, "3 of 3 model instances failed") || !strings.HasSuffix(last, "none committed") {
		t.Fatalf("every model failed: exit %d: %s", code, errOut)
	}
}
