package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// highwater runs the CLI in-process.
func highwater(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// withPassword puts a password into a database URL; the trust
// authentication of the test cluster ignores it.
func withPassword(dbURL, password string) string {
	return strings.Replace(dbURL, "postgres@", "postgres:"+password+"@", 1)
}

const secret = "s3cr3t-Pa55word"

func setupItems(t *testing.T) (db, dest string) {
	db = pg.NewDatabase(t,
		`CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, name text)`,
		`INSERT INTO items SELECT g, now() - interval '1 hour' + g * interval '1 ms', 'n' || g FROM generate_series(1, 500) g`)
	return withPassword(db, secret), "file://" + t.TempDir()
}

func TestExportStatusFiles(t *testing.T) {
	db, dest := setupItems(t)
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	code, out, errOut := highwater(t, args...)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "items: committed seq 1") {
		t.Fatalf("export printed %q", out)
	}
	pgtest.Exec(t, db, `UPDATE items SET name = 'changed', updated_at = now() WHERE id <= 5`)
	if code, _, errOut := highwater(t, args...); code != 0 {
		t.Fatalf("second export: %s", errOut)
	}
	code, out, _ = highwater(t, "status", "--dest", dest)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "items") || !strings.Contains(lines[2], " 2 ") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	code, out, _ = highwater(t, "status", "--dest", dest, "--model", "items", "--json")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"rows_transferred":500`) {
		t.Fatalf("status --json: %s", out)
	}
	code, out, _ = highwater(t, "files", "--dest", dest, "--model", "items")
	files := strings.Fields(out)
	if code != 0 || len(files) != 2 {
		t.Fatalf("files: %q", out)
	}
	for _, f := range files {
		p := strings.TrimPrefix(f, "file://")
		if _, err := os.Stat(p); err != nil || !strings.HasSuffix(p, ".parquet") {
			t.Fatalf("files printed %q: %v", f, err)
		}
	}
	assertNoSecret(t, dest)
}

func TestConfigFileWithSeveralModels(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db, `CREATE TABLE other (k text PRIMARY KEY, changed date)`, `INSERT INTO other VALUES ('a', '2026-01-01'), ('b', NULL)`)
	cfg := filepath.Join(t.TempDir(), "highwater.yaml")
	t.Setenv("HW_TEST_SOURCE", db)
	os.WriteFile(cfg, []byte(`
source: ${HW_TEST_SOURCE}
dest: `+dest+`
defaults:
  lookback: 1m
  target_file_size: 64MiB
models:
  - name: items
    table: public.items
    primary_key: [id]
    modified_at: updated_at
  - name: other
    table: other
    primary_key: [k]
    modified_at: changed
`), 0o644)
	code, out, errOut := highwater(t, "export", "--config", cfg)
	if code != 0 || !strings.Contains(out, "items: committed") || !strings.Contains(out, "other: committed") {
		t.Fatalf("export --config: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = highwater(t, "export", "--config", cfg, "--model", "other")
	if code != 0 || strings.Contains(out, "items") {
		t.Fatalf("export --config --model: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, secret) {
		t.Fatal("the password was printed")
	}
}

// TestBadInputCommitsNothing checks that each bad input ends with one
// clear line on stderr, a non-zero exit, nothing committed and no secret.
func TestBadInputCommitsNothing(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db,
		`CREATE TABLE nokey (id int, updated_at timestamptz)`,
		`CREATE TABLE textstamp (id int PRIMARY KEY, updated_at text)`,
		`CREATE TABLE reserved (id int PRIMARY KEY, updated_at timestamptz, _hw_version int)`,
		`CREATE TABLE nullkey (id int UNIQUE, updated_at timestamptz)`,
		`INSERT INTO nullkey VALUES (1, now()), (NULL, now())`)
	base := func(extra ...string) []string {
		return append([]string{"export", "--source", db, "--dest", dest, "--primary-key", "id", "--modified-at", "updated_at"}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown table", base("--table", "public.nope"), "does not exist"},
		{"unknown column", base("--table", "items", "--model", "x1", "--modified-at", "changed_at"), `"changed_at" does not exist in public.items; columns are: id, updated_at, name`},
		{"unknown key column", append(base("--table", "items", "--model", "x2"), "--primary-key", "uid"), `primary key column "uid" does not exist`},
		{"no unique index", base("--table", "nokey"), "no unique constraint or index"},
		{"text modified-at", base("--table", "textstamp"), "cannot order changes"},
		{"reserved column", base("--table", "reserved"), "reserved prefix _hw_"},
		{"null key", base("--table", "nullkey"), "NULL in a primary key column"},
		{"duplicate key", base("--model", "dup", "--source-query", "SELECT * FROM items UNION ALL SELECT * FROM items WHERE id = 7"), "duplicate (modified_at, primary key)"},
		{"failing source_query", base("--model", "bad", "--source-query", "SELECT * FROM nowhere"), "nowhere"},
		{"unreachable source", []string{"export", "--source", "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=2", "--dest", dest, "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, "source unreachable"},
		{"unwritable destination", []string{"export", "--source", db, "--dest", "file:///etc/hostname/lake", "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, "not a directory"},
		{"negative lookback", base("--table", "items", "--lookback", "-5s"), "negative"},
		{"unknown scheme", []string{"export", "--source", db, "--dest", "ftp://x/y", "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, `unknown scheme "ftp"`},
		{"dotdot prefix", []string{"status", "--dest", "file:///tmp/../etc"}, `".." segments`},
		{"half a window", base("--table", "items", "--window-start", "2026-01-01"), "needs both"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := highwater(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0; stdout %q", out)
			}
			if lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n"); len(lines) == 0 || !strings.Contains(lines[len(lines)-1], tc.want) {
				t.Fatalf("stderr does not end with a line saying %q:\n%s", tc.want, errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Fatalf("the password was printed: %s", errOut)
			}
		})
	}
	assertNothingCommitted(t, dest)
}

func TestIdentityClashAndLostRace(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db, `CREATE SCHEMA other`, `CREATE TABLE other.items (id bigint PRIMARY KEY, updated_at timestamptz)`)
	if code, _, errOut := highwater(t, "export", "--source", db, "--dest", dest, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at"); code != 0 {
		t.Fatal(errOut)
	}
	// other.items defaults to the model name "items" too.
	code, _, errOut := highwater(t, "export", "--source", db, "--dest", dest, "--table", "other.items", "--primary-key", "id", "--modified-at", "updated_at")
	if code == 0 || !strings.Contains(errOut, `relation "public.items", not "other.items"`) {
		t.Fatalf("identity clash: exit %d: %s", code, errOut)
	}
}

func assertNothingCommitted(t *testing.T, dest string) {
	t.Helper()
	dir := strings.TrimPrefix(dest, "file://")
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(p, "_manifests") && strings.HasSuffix(p, ".json") {
			t.Errorf("something was committed: %s", p)
		}
		return nil
	})
}

func assertNoSecret(t *testing.T, dest string) {
	t.Helper()
	dir := strings.TrimPrefix(dest, "file://")
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the password", p)
		}
		return nil
	})
}
