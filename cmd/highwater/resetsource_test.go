package main

import (
	"net/url"
	"strings"
	"testing"
)

// TestResetSourceErrorsPrintNoSecret: the source a reset of a model with
// the delete log connects to may be unreachable, refuse the role's
// password or be no URL at all: each is one error line (exit 1), with
// nothing committed and no password printed, whether the URL came from
// --source or from $HIGHWATER_SOURCE.
func TestResetSourceErrorsPrintNoSecret(t *testing.T) {
	db, dest, _ := deleteLogLake(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	reset := []string{"reset", "--dest", dest, "--model", "items", "--to-seq", "1", "--reason", "replay"}
	want := commits(t, dest)
	sources := map[string]string{
		"unreachable": "postgres://postgres:" + secret + "@127.0.0.1:1/db?connect_timeout=2",
		"bad port":    "postgres://postgres:" + secret + "@127.0.0.1:" + port + "x/db",
		"bad dsn":     "host=127.0.0.1 port=" + port + " password=" + secret + " sslmode=bogus",
		"bad url":     "postgres://postgres:" + secret + "@[::1/db",
	}
	for name, src := range sources {
		for _, how := range []string{"flag", "env"} {
			args := append([]string{}, reset...)
			if how == "flag" {
				args = append(args, "--source", src)
			} else {
				t.Setenv("HIGHWATER_SOURCE", src)
			}
			code, out, errOut := highwater(t, args...)
			t.Setenv("HIGHWATER_SOURCE", "")
			if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.HasPrefix(errOut, "highwater reset: ") {
				t.Errorf("%s (%s): exit %d, want 1 and one error line:\n%s%s", name, how, code, out, errOut)
			}
			t.Logf("%s (%s): %d %s", name, how, code, errOut)
			if strings.Contains(out+errOut, secret) {
				t.Errorf("%s (%s) printed the password:\n%s%s", name, how, out, errOut)
			}
		}
	}
	if got := commits(t, dest); got != want {
		t.Fatalf("the failed resets committed: %d commits, want %d", got, want)
	}
}
