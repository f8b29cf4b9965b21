package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/config"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// readmePassword would break a URL if pasted into one.
const readmePassword = `p@ss:w/rd?#%&"' ${x}`

// readmeConfigExample returns the README's config example as written.
func readmeConfigExample(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- config-example -->\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```\n<!-- /config-example -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no config example between <!-- config-example --> markers")
	}
	return example
}

// TestREADMEConfigExample validates the README's config example as
// written, with a password that would break a URL if pasted into one.
func TestREADMEConfigExample(t *testing.T) {
	example := readmeConfigExample(t)
	t.Setenv("HIGHWATER_PG_PASSWORD", readmePassword)
	t.Setenv("HIGHWATER_DEST", "")
	cfg, err := config.Parse([]byte(example), func(k string) (string, bool) { return os.LookupEnv(k) })
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Source)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := u.User.Password(); got != readmePassword {
		t.Fatalf("the source does not carry the password: %q", got)
	}
	p := filepath.Join(t.TempDir(), "highwater.yaml")
	os.WriteFile(p, []byte(example), 0o600)
	code, out, errOut := highwater(t, "config", "validate", "--config", p)
	if code != 0 || !strings.Contains(out, "ok, 2 models") || strings.Contains(out+errOut, readmePassword) {
		t.Fatalf("config validate: exit %d: %s%s", code, out, errOut)
	}
}

// TestREADMEConfigExampleRuns exports with the README's config example:
// its text as written but for the source's host and database, which
// become the test server's, against tables its models read, as the role
// it names, with its password variable and the destination variable it
// offers. Both models must commit every row.
func TestREADMEConfigExampleRuns(t *testing.T) {
	example := readmeConfigExample(t)
	const host = "db.internal/app"
	if strings.Count(example, host) != 1 {
		t.Fatalf("the README's example no longer names its source as %q: update this test", host)
	}
	db := pg.NewDatabase(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	at := u.Host + u.Path
	if u.RawQuery != "" {
		at += "?" + u.RawQuery
	}
	example = strings.Replace(example, host, at, 1)
	pgtest.Exec(t, db,
		`DO $$ BEGIN CREATE ROLE exporter LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`CREATE TABLE orders (id bigint PRIMARY KEY, customer text, updated_at timestamptz NOT NULL)`,
		`CREATE TABLE order_lines (order_id bigint REFERENCES orders, line_no int, sku text, qty int, PRIMARY KEY (order_id, line_no))`,
		`INSERT INTO orders SELECT g, 'c' || g % 7, now() - interval '1 hour' + g * interval '1 s' FROM generate_series(1, 40) g`,
		`INSERT INTO order_lines SELECT o, l, 'sku-' || l, l FROM generate_series(1, 40) o, generate_series(1, 3) l`,
		`GRANT SELECT ON orders, order_lines TO exporter`)
	t.Setenv("HIGHWATER_PG_PASSWORD", readmePassword)
	dest := "file://" + t.TempDir()
	t.Setenv("HIGHWATER_DEST", dest)
	p := filepath.Join(t.TempDir(), "highwater.yaml")
	if err := os.WriteFile(p, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := highwater(t, "export", "--config", p)
	if code != 0 || strings.Contains(out+errOut, readmePassword) {
		t.Fatalf("export --config of the README's example: exit %d\n%s%s", code, out, errOut)
	}
	for model, rows := range map[string]int64{"orders": 40, "order_lines": 120} {
		code, out, errOut := highwater(t, "status", "--dest", dest, "--model", model, "--json")
		var l statusLine
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.Metrics == nil || l.Metrics.RowsTransferred != rows {
			t.Fatalf("status of %s: exit %d: %s%s (want one commit of %d rows)", model, code, out, errOut, rows)
		}
	}
}
