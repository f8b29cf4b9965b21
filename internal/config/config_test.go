package config

import (
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
