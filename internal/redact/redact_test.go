package redact_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/redact"
)

// Passwords of every awkward shape: short ones that occur in any message,
// common words, every character that ends a URL part, escapes, unicode.
var passwords = []string{
	"a", "x", "ab", "db", "postgres", "user", "host", "password", "app",
	"p@ss", "p@ss@word", "p#ss", "p/ss", "12/ss", "p?ss", "p:ss", "p%ss", "p%41ss", "p ss", " lead", "trail ",
	"q'uote", `back\slash`, `d"q`, "p=w", "p;w", "p&w=1", "пароль", "密码🔑", "@", "/", ":", "%", "'",
}

// TestURL checks that a URL's password is replaced as a whole, encoded or
// not, and that nothing else of the URL is changed.
func TestURL(t *testing.T) {
	for _, pw := range passwords {
		encoded := "postgres://" + url.UserPassword("u", pw).String() + "@db.example:5432/app?sslmode=disable"
		if got, want := redact.URL(encoded), "postgres://u:xxxxx@db.example:5432/app?sslmode=disable"; got != want {
			t.Errorf("URL(%q) = %q, want %q", encoded, got, want)
		}
		// Unencoded, as people write them: the result may drop the
		// user info but must hold nothing of the password.
		raw := "postgres://u:" + pw + "@db.example:5432/app"
		got := redact.URL(raw)
		if !strings.HasPrefix(got, "postgres://") || !strings.Contains(got, "db.example:5432") {
			t.Errorf("URL(%q) = %q: the host is lost", raw, got)
		}
		if got != "postgres://u:xxxxx@db.example:5432/app" && got != "postgres://db.example:5432/app" {
			t.Errorf("URL(%q) = %q, want the password masked or no user info", raw, got)
		}
	}
}

func TestURLQuery(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"postgres://h/db?password=hunter2&sslmode=require", "postgres://h/db?password=xxxxx&sslmode=require"},
		{"postgres://h/db?sslpassword=a", "postgres://h/db?sslpassword=xxxxx"},
		{"s3://bucket/lake?endpoint=http://key:sec@127.0.0.1:7070", "s3://bucket/lake?endpoint=http%3A%2F%2Fkey%3Axxxxx%40127.0.0.1%3A7070"},
		{"azblob://c/p?sig=abc&se=2030-01-01", "azblob://c/p?sig=xxxxx&se=2030-01-01"},
		// What is not a secret stays as written, in its order.
		{"s3://b/lake/{tenant}?prefix={tenant}&endpoint=http://127.0.0.1:7070/x&region=eu-west-1&a=%7B",
			"s3://b/lake/{tenant}?prefix={tenant}&endpoint=http://127.0.0.1:7070/x&region=eu-west-1&a=%7B"},
		{"s3://b/l?x&token", "s3://b/l?x&token=xxxxx"},
		{"s3://b/l?a=1;b=2", "s3://b/l"},
		{"file:///lake/a", "file:///lake/a"},
		{"s3://bucket/%zz?secret=1", "s3://bucket/%zz?secret=xxxxx"},
		{"postgres://u:p@h:notaport/db?password=a&x=%zz", "postgres://u:xxxxx@h:notaport/db"},
		{"postgres://u:p@h/db#frag", "postgres://u:xxxxx@h/db"},
		{"no scheme here", "no scheme here"},
		{"user@host?x", redact.Hidden},
	} {
		if got := redact.URL(tc.raw); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestAmbiguous(t *testing.T) {
	for raw, want := range map[string]bool{
		"postgres://u:pw@h/db":           false,
		"postgres://u:p%2Fw@h/db":        false,
		"postgres://h/db":                false,
		"postgres://u:p/ss@h/db":         true,
		"postgres://u:12/ss@h/db":        true,
		"postgres://u:p?ss@h/db":         true,
		"postgres://u:p#ss@h/db":         true,
		"postgres://u:p@ss@h/db":         true,
		"s3://b/p?endpoint=http://k:s@h": false,
		"postgres://h:5432/db?x=a@b":     true, // cannot be told from "u:5432/db?x=a@b"
		"host=h password=a://b@c":        false,
		"user=u password=p/ss@x y":       false,
	} {
		if got := redact.Ambiguous(raw); got != want {
			t.Errorf("Ambiguous(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestDSN checks keyword/value strings: the password field is masked as a
// whole, quoted or not, and the other fields stay as they were.
func TestDSN(t *testing.T) {
	quote := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	for _, pw := range passwords {
		for _, dsn := range []string{
			"host=db.example user=u password=" + quote(pw) + " dbname=app",
			"host=db.example user=u password = " + quote(pw) + " dbname=app",
		} {
			if got, want := redact.DSN(dsn), "host=db.example user=u password=xxxxx dbname=app"; got != want {
				t.Errorf("DSN(%q) = %q, want %q", dsn, got, want)
			}
		}
		if !strings.ContainsAny(pw, ` '\`) {
			dsn := "host=db.example user=u password=" + pw + " dbname=app"
			if got, want := redact.DSN(dsn), "host=db.example user=u password=xxxxx dbname=app"; got != want {
				t.Errorf("DSN(%q) = %q, want %q", dsn, got, want)
			}
		}
	}
	for _, bad := range []string{
		"host=h password='p w dbname=app", // unterminated quote
		"host=h password=p w",             // a word without '='
		`host=h password=p\`,
	} {
		if got := redact.DSN(bad); got != redact.Hidden {
			t.Errorf("DSN(%q) = %q, want it hidden", bad, got)
		}
	}
	if got, want := redact.DSN("postgresql://u:a@h/db"), "postgresql://u:xxxxx@h/db"; got != want {
		t.Errorf("DSN of a URL = %q, want %q", got, want)
	}
}

func TestUnquoted(t *testing.T) {
	for msg, want := range map[string]string{
		`invalid port ":pw" after host`: "invalid port",
		"invalid userinfo":              "invalid userinfo",
		`missing "=" after "w"`:         "missing",
	} {
		if got := redact.Unquoted(msg); got != want {
			t.Errorf("Unquoted(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestParseError(t *testing.T) {
	for raw, want := range map[string]string{
		"s3://%zz":                  `invalid URL escape "%zz"`,
		"postgres://u:p%zz@h/db":    "invalid URL escape",
		"postgres://u:pa@h:p%zz/db": "invalid port",
	} {
		_, err := url.Parse(raw)
		if err == nil {
			t.Fatalf("%q parses", raw)
		}
		if got := redact.ParseError(raw, err); got != want {
			t.Errorf("ParseError(%q) = %q, want %q", raw, got, want)
		}
	}
}
