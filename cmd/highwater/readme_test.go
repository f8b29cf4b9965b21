package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/config"
)

// TestREADMEConfigExample validates the README's config example as
// written, with a password that would break a URL if pasted into one.
func TestREADMEConfigExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- config-example -->\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```\n<!-- /config-example -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no config example between <!-- config-example --> markers")
	}
	pw := `p@ss:w/rd?#%&"' ${x}`
	t.Setenv("HIGHWATER_PG_PASSWORD", pw)
	t.Setenv("HIGHWATER_DEST", "")
	cfg, err := config.Parse([]byte(example), func(k string) (string, bool) { return os.LookupEnv(k) })
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Source)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := u.User.Password(); got != pw {
		t.Fatalf("the source does not carry the password: %q", got)
	}
	p := filepath.Join(t.TempDir(), "highwater.yaml")
	os.WriteFile(p, []byte(example), 0o600)
	code, out, errOut := highwater(t, "config", "validate", "--config", p)
	if code != 0 || !strings.Contains(out, "ok, 2 models") || strings.Contains(out+errOut, pw) {
		t.Fatalf("config validate: exit %d: %s%s", code, out, errOut)
	}
}
