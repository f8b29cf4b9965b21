package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

const oneModel = `
source: postgres://u:${PW}@db/app
dest: file:///lake
models:
  - name: orders
    table: public.orders
    primary_key: [id]
    modified_at: updated_at
    lookback: 2m
`

func TestParseExpandsEnvironment(t *testing.T) {
	f, err := Parse([]byte(oneModel), lookup(map[string]string{"PW": "hunter2"}))
	if err != nil {
		t.Fatal(err)
	}
	if f.Source != "postgres://u:hunter2@db/app" || f.Models[0].Lookback != "2m" {
		t.Fatalf("parsed %+v", f)
	}
	if d, _ := f.Defaults.Merge(f.Models[0].Tuning).LookbackDuration(); d.Minutes() != 2 {
		t.Fatalf("lookback %v", d)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unset variable", oneModel, "not set: PW"},
		{"unknown key", strings.Replace(oneModel, "lookback: 2m", "lookbak: 2m", 1), "field lookbak not found"},
		{"no models", "source: x\ndest: y\n", "no models"},
		{"negative lookback", strings.Replace(oneModel, "2m", "-2m", 1), "negative"},
		{"bad size", strings.Replace(oneModel, "lookback: 2m", "target_file_size: lots", 1), "target_file_size"},
		{"table and query", strings.Replace(oneModel, "table: public.orders", "table: t\n    source_query: SELECT 1", 1), "exactly one of table and source_query"},
		{"tenants without column", strings.Replace(oneModel, "lookback: 2m", "tenants: [a]", 1), "need a tenant_column"},
		{"tenants and query", strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants: [a]\n    tenants_query: SELECT 1", 1), "one of tenant, tenants and tenants_query"},
		{"tenant and tenants", strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants: [a]\n    tenant: b", 1), "one of tenant, tenants and tenants_query"},
		{"column without tenants", strings.Replace(oneModel, "lookback: 2m", "tenant_column: org", 1), "needs tenant, tenants or tenants_query"},
		{"empty tenants", strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants: []", 1), "lists no tenant"},
		{"tenant twice", strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants: [a, b, a]", 1), `tenant "a" is listed twice`},
		{"tenant with NUL", strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants: [\"a\\0b\"]", 1), "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"PW": "hunter2"}
			if tc.name == "unset variable" {
				env = nil
			}
			_, err := Parse([]byte(tc.doc), lookup(env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestParseErrorsHideExpandedSecrets(t *testing.T) {
	doc := strings.Replace(oneModel, "lookback: 2m", "page_rows: ${PW}", 1)
	_, err := Parse([]byte(doc), lookup(map[string]string{"PW": "hunter2"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("want an error without the secret, got %v", err)
	}
}

// TestExpandValuesOnly checks that a variable's value stays one value,
// whatever it holds, and the braces-only rule.
func TestExpandValuesOnly(t *testing.T) {
	doc := `
source: ${SRC}
dest: ${DEST:-file:///default/lake}
models:
  - name: ${NAME}
    source_query: SELECT id, updated_at, $body$ a $1 $x $$ b $body$ AS q, '$$$$' AS c FROM t
    primary_key: id
    modified_at: updated_at
    compression: ${CODEC:-snappy}
    page_rows: ${ROWS}
`
	env := map[string]string{
		"SRC":  "postgres://u@h/db\nmodels: []\n# comment",
		"NAME": "orders\n    table: evil",
		"ROWS": "1000",
	}
	f, err := Parse([]byte(doc), lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Models[0]
	if f.Source != env["SRC"] || m.Name != env["NAME"] || m.Table != "" || len(f.Models) != 1 {
		t.Fatalf("a value changed the structure: %+v", f)
	}
	if f.Dest != "file:///default/lake" || m.Compression != "snappy" || m.PageRows != 1000 {
		t.Fatalf("defaults or types: dest %q, compression %q, page_rows %d", f.Dest, m.Compression, m.PageRows)
	}
	if want := "SELECT id, updated_at, $body$ a $1 $x $ b $body$ AS q, '$$' AS c FROM t"; m.SourceQuery != want {
		t.Fatalf("source_query\n got %q\nwant %q", m.SourceQuery, want)
	}
	if len(m.PrimaryKey) != 1 || m.PrimaryKey[0] != "id" {
		t.Fatalf("primary_key: id read as %q", m.PrimaryKey)
	}
	// Keys are not expanded.
	if _, err := Parse([]byte(strings.Replace(doc, "dest:", "${KEY}:", 1)), lookup(map[string]string{"SRC": "x", "NAME": "n", "ROWS": "1", "KEY": "dest"})); err == nil || !strings.Contains(err.Error(), "${KEY}") {
		t.Fatalf("a key was expanded: %v", err)
	}
}

func TestExpandRefuses(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"unclosed", "a ${B", "no closing }"},
		{"not a name", "${1}", "not a variable name"},
		{"unset", "${HW_NOT_SET}", "not set: HW_NOT_SET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(oneModel, "file:///lake", tc.value, 1)
			_, err := Parse([]byte(doc), lookup(map[string]string{"PW": "x"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
	// A default may be a secret: an error about the value never shows it.
	doc := strings.Replace(oneModel, "lookback: 2m", "page_rows: ${HW_ROWS:-hunter3}", 1)
	if _, err := Parse([]byte(doc), lookup(map[string]string{"PW": "x"})); err == nil || strings.Contains(err.Error(), "hunter3") {
		t.Fatalf("want an error without the default, got %v", err)
	}
}

// TestPasswordEnv checks that any password works through password_env.
func TestPasswordEnv(t *testing.T) {
	pw := `p@ss:w/rd?#%&"' $x`
	doc := strings.Replace(oneModel, "source: postgres://u:${PW}@db/app", "source: postgres://u@db/app\npassword_env: HW_PW", 1)
	f, err := Parse([]byte(doc), lookup(map[string]string{"HW_PW": pw}))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(f.Source)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := u.User.Password(); got != pw || u.User.Username() != "u" || u.Host != "db" || u.Path != "/app" {
		t.Fatalf("source %q does not carry the password", f.Source)
	}
	if _, err := Parse([]byte(doc), lookup(nil)); err == nil || !strings.Contains(err.Error(), "HW_PW") {
		t.Fatalf("unset password_env: %v", err)
	}
}

func TestParseTenants(t *testing.T) {
	doc := strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants: [\"\", a/b, \"two words\"]", 1)
	f, err := Parse([]byte(doc), lookup(map[string]string{"PW": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Models[0]
	if !m.FansOut() || len(m.Tenants) != 3 || m.Tenants[0] != "" || m.Tenants[1] != "a/b" {
		t.Fatalf("tenants %q", m.Tenants)
	}
	doc = strings.Replace(oneModel, "lookback: 2m", "tenant_column: org\n    tenants_query: SELECT org FROM orgs", 1)
	if f, err = Parse([]byte(doc), lookup(map[string]string{"PW": "x"})); err != nil || !f.Models[0].FansOut() {
		t.Fatalf("tenants_query: %v", err)
	}
}

// TestParseErrorsByStructure: whatever the expanded value, short or a
// common word or YAML syntax, an error names the variable and the line and
// neither quotes the value nor mangles the message.
func TestParseErrorsByStructure(t *testing.T) {
	const typeErr = "parse config: yaml: unmarshal errors:\n  line 9: cannot unmarshal !!str `${PW}` into int"
	generic := regexp.MustCompile(`^parse config: line \d+: a value taken from the environment \(\$\{PW\}\) does not fit there: check the variable, or quote it in the file$`)
	for _, pw := range []string{"a", "x", "ab", "user", "postgres", "parse", "line", "hunter2", "a: b", "'", "[x", "p #w", "пароль"} {
		for _, tc := range []struct{ name, doc string }{
			{"wrong type", strings.Replace(oneModel, "lookback: 2m", "page_rows: ${PW}", 1)},
			{"value breaks the YAML", strings.Replace(oneModel, "postgres://u:${PW}@db/app", "${PW}", 1)},
		} {
			_, err := Parse([]byte(tc.doc), lookup(map[string]string{"PW": pw}))
			if err == nil {
				continue // the value happened to be valid there
			}
			// The message is one of two exact shapes, so nothing of
			// the value can be in it, however short.
			msg := err.Error()
			if msg != typeErr && !generic.MatchString(msg) {
				t.Errorf("%s, PW=%q: got %q", tc.name, pw, msg)
			}
		}
	}
}

// TestErrorLinesAreTheFiles: the expanded tree is encoded again before it
// is decoded strictly, and the encoding collapses runs of blank lines, so
// an error's line is mapped back to the file's own line.
func TestErrorLinesAreTheFiles(t *testing.T) {
	doc := strings.Replace(oneModel, "lookback: 2m", "page_rows: ${ROWS}", 1)
	doc = strings.Replace(doc, "dest: file:///lake\n", "dest: file:///lake\n\n\n\n# models follow\n\n\n", 1)
	want := strings.Count(doc[:strings.Index(doc, "page_rows")], "\n") + 1
	_, err := Parse([]byte(doc), lookup(map[string]string{"PW": "x", "ROWS": "many"}))
	if err == nil {
		t.Fatal("page_rows: many was taken")
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("line %d: cannot unmarshal !!str `${ROWS}`", want)) {
		t.Fatalf("want the file's line %d and its own text, got %q", want, msg)
	}
}
