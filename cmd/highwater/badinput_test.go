package main

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/internal/redact"
)

// badInput is one case of the catalogue: a command that must fail.
type badInput struct {
	name string
	args []string
	env  map[string]string // set for the case only; secrets go here too
	want string            // the last line of stderr must contain it
	code int               // the exit code, when it matters (2: a command-line error)
	dest string            // where to check that nothing new was committed (default: the shared lake)
}

// TestBadInputCatalogue extends TestBadInputCommitsNothing: each input
// ends with a non-zero exit, a last stderr line naming the problem,
// nothing committed and no secret printed, whatever the input is.
func TestBadInputCatalogue(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db,
		`CREATE VIEW items_view AS SELECT * FROM items`,
		`CREATE SCHEMA other`,
		`CREATE TABLE other.items (id bigint PRIMARY KEY, updated_at timestamptz)`)
	base := func(extra ...string) []string {
		return append([]string{"export", "--source", db, "--dest", dest, "--primary-key", "id", "--modified-at", "updated_at"}, extra...)
	}
	withDest := func(d string, extra ...string) []string {
		return append([]string{"export", "--source", db, "--dest", d, "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, extra...)
	}

	// A lake that already holds public.items as the model "items", for
	// the identity clash.
	clashDest := "file://" + t.TempDir()
	if code, _, errOut := highwater(t, withDest(clashDest)...); code != 0 {
		t.Fatalf("first export into the clash lake: %s", errOut)
	}

	// Config files: the source comes from the environment, as the docs
	// recommend, so the password never sits in the file.
	cfgDir := t.TempDir()
	writeCfg := func(name, body string) string {
		p := filepath.Join(cfgDir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	model := func(name string) string {
		return "  - name: " + name + "\n    table: public.items\n    primary_key: [id]\n    modified_at: updated_at\n"
	}
	srcEnv := map[string]string{"HW_BAD_SOURCE": db, "HIGHWATER_SOURCE": ""}
	unknownKey := writeCfg("unknown.yaml", "source: ${HW_BAD_SOURCE}\ndest: "+dest+"\nmodels:\n"+model("items")+"    tabel: items\n")
	noModels := writeCfg("nomodels.yaml", "source: ${HW_BAD_SOURCE}\ndest: "+dest+"\nmodels: []\n")
	unsetVar := writeCfg("unset.yaml", "source: ${HW_UNSET_SOURCE_URL}\ndest: "+dest+"\nmodels:\n"+model("items"))
	dupModels := writeCfg("dup.yaml", "source: ${HW_BAD_SOURCE}\ndest: "+dest+"\nmodels:\n"+model("items")+model("items"))
	both := writeCfg("both.yaml", "source: ${HW_BAD_SOURCE}\ndest: "+dest+"\nmodels:\n"+model("items")+"    source_query: SELECT * FROM items\n")

	cases := []badInput{
		// Destinations.
		{name: "malformed URL", args: withDest("s3://%zz"), want: `invalid URL escape "%zz"`},
		{name: "unknown scheme http", args: withDest("http://example.com/lake"), want: `unknown scheme "http"`},
		{name: "no bucket", args: withDest("s3:///x"), want: "names no bucket"},
		{name: "secret in an S3 URL parameter", args: withDest("s3://bucket/lake?secret_access_key=" + secret), want: `unknown URL parameter "secret_access_key"`},
		// Configs.
		{name: "config with unknown key", args: []string{"export", "--config", unknownKey}, env: srcEnv, want: "field tabel not found"},
		{name: "config with no models", args: []string{"export", "--config", noModels}, env: srcEnv, want: "config has no models"},
		{name: "config env var unset", args: []string{"export", "--config", unsetVar}, env: map[string]string{"HIGHWATER_SOURCE": ""}, want: "HW_UNSET_SOURCE_URL"},
		{name: "config with duplicate models", args: []string{"export", "--config", dupModels}, env: srcEnv, want: `model "items" appears twice`},
		{name: "config with table and source_query", args: []string{"export", "--config", both}, env: srcEnv, want: "needs exactly one of table and source_query"},
		{name: "missing config file", args: []string{"export", "--config", filepath.Join(cfgDir, "absent.yaml")}, want: "no such file"},
		{name: "config with table flag", args: []string{"export", "--config", dupModels, "--table", "items"}, env: srcEnv, want: "--table goes in the config file"},
		// Models.
		{name: "identity clash", args: withDest(clashDest, "--table", "other.items", "--model", "items"), dest: clashDest, want: `relation "public.items", not "other.items"`},
		{name: "source_query fails in a row", args: base("--model", "div", "--source-query", "SELECT id, updated_at, 1 / (id - 250) AS x FROM items"), want: "division by zero"},
		{name: "source_query with a column twice", args: base("--model", "twice", "--source-query", "SELECT id, updated_at, name, name FROM items"), want: `two columns named "name"`},
		{name: "view", args: base("--table", "items_view"), want: "export it with a source_query instead"},
		{name: "modified-at is a key column", args: append(base("--table", "items", "--model", "mk"), "--primary-key", "id,updated_at"), want: `"updated_at" cannot be both the modified-at column and part of the key`},
		{name: "tenant without tenant column", args: base("--table", "items", "--model", "t1", "--tenant", "acme"), want: "a tenant value is set but no tenant column"},
		{name: "tenant column without tenant", args: base("--table", "items", "--model", "t2", "--tenant-column", "name"), want: "a tenant column is set but no tenant value"},
		{name: "soft-delete column missing", args: base("--table", "items", "--model", "sd", "--soft-delete", "deleted"), want: `soft-delete column "deleted" does not exist in public.items; columns are: id, updated_at, name`, code: 1},
		{name: "delete log of a source_query", args: base("--model", "dq", "--source-query", "SELECT * FROM items", "--delete-log"), want: "--delete-log needs a table", code: 2},
		{name: "soft delete with a config", args: []string{"export", "--config", dupModels, "--soft-delete", "name"}, env: srcEnv, want: "--soft-delete goes in the config file"},
		// Flags and commands.
		{name: "lookback not a duration", args: base("--table", "items", "--lookback", "5 parsecs"), want: `invalid argument "5 parsecs" for "--lookback" flag`, code: 2},
		{name: "unknown flag", args: base("--table", "items", "--frobnicate"), want: "unknown flag: --frobnicate", code: 2},
		{name: "unknown command", args: []string{"frobnicate", "--dest", dest}, want: `unknown command "frobnicate"`},
		{name: "window end before start", args: base("--table", "items", "--model", "w1", "--window-start", "2026-02-01", "--window-end", "2026-01-01"), want: "window"},
		{name: "window not a timestamp", args: base("--table", "items", "--model", "w2", "--window-start", "yesterday-ish", "--window-end", "2026-01-01"), want: "yesterday-ish"},
	}

	// The S3 cases need the test server; the secret key goes into the
	// environment the SDK reads, and must not come out.
	if ep := os.Getenv("HIGHWATER_TEST_S3_ENDPOINT"); ep != "" {
		var b [6]byte
		rand.Read(b[:])
		missing := "s3://hw-missing-" + hex.EncodeToString(b[:]) + "/lake?endpoint=" + ep
		cases = append(cases,
			badInput{name: "missing bucket", args: withDest(missing), want: "bucket"},
			badInput{name: "wrong S3 credentials", args: withDest(missing),
				env:  map[string]string{"AWS_ACCESS_KEY_ID": "testkey", "AWS_SECRET_ACCESS_KEY": secret},
				want: "credentials"},
		)
	} else {
		t.Log("HIGHWATER_TEST_S3_ENDPOINT is not set: the missing-bucket and wrong-credentials cases are left out")
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			d := dest
			if tc.dest != "" {
				d = tc.dest
			}
			before := committed(t, d)
			code, out, errOut := highwater(t, tc.args...)
			if code == 0 || (tc.code != 0 && code != tc.code) {
				t.Fatalf("exit %d; stdout %q, stderr %q", code, out, lastLine(errOut))
			}
			last := lastLine(errOut)
			if !strings.Contains(last, tc.want) {
				t.Fatalf("the last line of stderr does not say %q:\n%s", tc.want, errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Fatalf("the secret was printed: %s", errOut)
			}
			if after := committed(t, d); after != before {
				t.Fatalf("%d commits before, %d after", before, after)
			}
			t.Logf("exit %d: %s", code, last)
		})
	}
	assertNothingCommitted(t, dest)
}

// TestHostileValuesWork exports inputs that look dangerous but are valid:
// a tenant value holding quotes and SQL, and identifiers with quotes,
// spaces and non-ASCII letters. They must export exactly their rows.
func TestHostileValuesWork(t *testing.T) {
	db, _ := setupItems(t)
	t.Run("tenant with quotes and SQL", func(t *testing.T) {
		evil := `o'brien"; DROP TABLE items; --`
		pgtest.Exec(t, db,
			`CREATE TABLE accounts (id int PRIMARY KEY, updated_at timestamptz NOT NULL, org text NOT NULL)`,
			`INSERT INTO accounts SELECT g, now() - interval '1 hour', CASE WHEN g % 3 = 0 THEN 'o''brien"; DROP TABLE items; --' ELSE 'other' END FROM generate_series(1, 300) g`)
		dest := "file://" + t.TempDir()
		code, _, errOut := highwater(t, "export", "--source", db, "--dest", dest, "--table", "accounts", "--primary-key", "id",
			"--modified-at", "updated_at", "--tenant-column", "org", "--tenant", evil)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		n, tenants := lakeCount(t, dest, "accounts", "org")
		if n != 100 || len(tenants) != 1 || tenants[0] != evil {
			t.Fatalf("lake holds %d rows of tenants %q, want 100 of %q", n, tenants, evil)
		}
		pgtest.Exec(t, db, `SELECT 1 FROM items LIMIT 1`) // still there
	})
	t.Run("identifiers with quotes spaces and unicode", func(t *testing.T) {
		pgtest.Exec(t, db,
			`CREATE SCHEMA "Sch ema"`,
			`CREATE TABLE "Sch ema"."Wéird ""Tab"" le" ("Ïd ""k""" int PRIMARY KEY, "up dated" timestamptz NOT NULL, "näme" text)`,
			`INSERT INTO "Sch ema"."Wéird ""Tab"" le" SELECT g, now() - interval '1 hour' + g * interval '1 ms', 'ü' || g FROM generate_series(1, 250) g`)
		dest := "file://" + t.TempDir()
		code, _, errOut := highwater(t, "export", "--source", db, "--dest", dest, "--table", `"Sch ema"."Wéird ""Tab"" le"`,
			"--model", "weird", "--primary-key", `Ïd "k"`, "--modified-at", "up dated")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if n, _ := lakeCount(t, dest, "weird", "näme"); n != 250 {
			t.Fatalf("lake holds %d rows, want 250", n)
		}
		// Without --model, the model should be the table's name, unquoted.
		t.Run("default model name", func(t *testing.T) {
			code, out, errOut := highwater(t, "export", "--source", db, "--dest", dest, "--table", `"Sch ema"."Wéird ""Tab"" le"`,
				"--primary-key", `Ïd "k"`, "--modified-at", "up dated")
			if code != 0 || !strings.HasPrefix(out, `Wéird "Tab" le: committed`) {
				t.Fatalf("default model name: exit %d: %s%s", code, out, errOut)
			}
		})
	})
}

// lakeCount reads the committed files of model with DuckDB: the row count
// and the distinct values of col.
func lakeCount(t *testing.T, dest, model, col string) (int, []string) {
	t.Helper()
	code, out, errOut := highwater(t, "files", "--dest", dest, "--model", model)
	if code != 0 {
		t.Fatalf("files: %s", errOut)
	}
	var paths []string
	for _, f := range strings.Fields(out) {
		paths = append(paths, "'"+strings.TrimPrefix(f, "file://")+"'")
	}
	if len(paths) == 0 {
		return 0, nil
	}
	ddb, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ddb.Close()
	src := "read_parquet([" + strings.Join(paths, ",") + "])"
	var n int
	if err := ddb.QueryRow("SELECT count(*) FROM " + src).Scan(&n); err != nil {
		t.Fatal(err)
	}
	rows, err := ddb.Query(`SELECT DISTINCT "` + strings.ReplaceAll(col, `"`, `""`) + `"::VARCHAR FROM ` + src + ` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vals []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vals = append(vals, v)
	}
	return n, vals
}

// committed counts the commit documents of every model under a file://
// lake, so a case can check that it added none.
func committed(t *testing.T, dest string) int {
	t.Helper()
	if !strings.HasPrefix(dest, "file://") {
		return 0
	}
	n := 0
	filepath.Walk(strings.TrimPrefix(dest, "file://"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(p, "_manifests") && strings.HasSuffix(p, ".json") {
			n++
		}
		return nil
	})
	return n
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestSecretsNeverPrinted runs the binary with passwords of every awkward
// shape in every place a secret can come from, each in a command that
// fails, and checks what it prints.
//
// For a password of three characters or more, no three-character piece of
// it may appear anywhere in stdout or stderr. A password of one or two
// characters, or one that is a common word, occurs in any message by
// chance: for those the message must have its exact expected structure
// (the URL with the password replaced as a whole, or without user info),
// which also shows that the message is not mangled.
func TestSecretsNeverPrinted(t *testing.T) {
	db, dest := setupItems(t)
	cfgDir := t.TempDir()

	// Pieces of these appear in no message by chance.
	distinct := []string{"Zq@9k#Xv", "Zq/9k?Xv", "12/Zqk9", "Zq:9k%Xv", "Zq 9k'Xv", `Zq\9k"Xv`, "Zq%41kXv", "Zq@@kXv",
		"Жq€9k🔑Xv", "Zq9kXvW", "Zq;9k=Xv", " Zq9k "}
	// These may: their messages are checked by structure.
	common := []string{"a", "x", "ab", "u", "db", "1", "postgres", "user", "host", "source", "xxxxx"}

	kvQuote := func(v string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'" }
	type scenario struct {
		name string
		args func(pw string) []string
		env  func(pw string) map[string]string
		// want is what the last line of stderr must contain; exact says
		// it is the whole redacted source, so it holds for any password.
		want func(pw string) string
	}
	export := func(source string, extra ...string) []string {
		return append([]string{"export", "--source", source, "--dest", dest, "--table", "items", "--primary-key", "id",
			"--modified-at", "updated_at", "--model", "secrets"}, extra...)
	}
	encoded := func(pw string) string { return url.UserPassword("u", pw).String() }
	scenarios := []scenario{
		{name: "URL encoded, bad port",
			args: func(pw string) []string { return export("postgres://" + encoded(pw) + "@127.0.0.1:notaport/db") },
			want: func(string) string { return "parse source URL postgres://u:xxxxx@127.0.0.1:notaport/db: invalid port" }},
		{name: "URL encoded, unreachable",
			args: func(pw string) []string { return export("postgres://" + encoded(pw) + "@127.0.0.1:1/db") },
			want: func(string) string {
				return "connect to source: source unreachable: failed to connect to `user=u database=db`"
			}},
		{name: "URL unencoded, unreachable",
			args: func(pw string) []string { return export("postgres://u:" + pw + "@127.0.0.1:1/db") },
			want: func(string) string { return "source" }},
		{name: "URL unencoded, bad port",
			args: func(pw string) []string { return export("postgres://u:" + pw + "@127.0.0.1:notaport/db") },
			want: func(string) string { return "127.0.0.1:notaport/db" }},
		{name: "password query parameter, bad port",
			args: func(pw string) []string {
				return export("postgres://u@127.0.0.1:notaport/db?password=" + url.QueryEscape(pw))
			},
			want: func(string) string {
				return "parse source URL postgres://u@127.0.0.1:notaport/db?password=xxxxx: invalid port"
			}},
		{name: "keyword/value, unreachable",
			args: func(pw string) []string {
				return export("host=127.0.0.1 port=1 user=u password=" + kvQuote(pw) + " dbname=db")
			},
			want: func(string) string {
				return "connect to source: source unreachable: failed to connect to `user=u database=db`"
			}},
		{name: "keyword/value, bad port",
			args: func(pw string) []string {
				return export("host=127.0.0.1 port=notaport user=u password=" + kvQuote(pw) + " dbname=db")
			},
			want: func(string) string {
				return "parse source URL host=127.0.0.1 port=notaport user=u password=xxxxx dbname=db: invalid port"
			}},
		{name: "keyword/value, unterminated quote",
			args: func(pw string) []string { return export("host=127.0.0.1 port=1 user=u password='" + pw + " dbname=db") },
			want: func(string) string { return "parse source URL " + redact.Hidden + ": failed to parse as keyword/value" }},
		{name: "PGPASSWORD, unreachable",
			args: func(string) []string { return export("postgres://u@127.0.0.1:1/db") },
			env:  func(pw string) map[string]string { return map[string]string{"PGPASSWORD": pw} },
			want: func(string) string {
				return "connect to source: source unreachable: failed to connect to `user=u database=db`"
			}},
		{name: "PGPASSWORD in a config, bad port",
			args: func(pw string) []string {
				p := filepath.Join(cfgDir, "pgpassword.yaml")
				doc := "source: postgres://u:${PGPASSWORD}@127.0.0.1:notaport/db\ndest: " + dest + "\nmodels:\n" +
					"  - name: items\n    table: public.items\n    primary_key: [id]\n    modified_at: updated_at\n"
				if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"export", "--config", p}
			},
			env:  func(pw string) map[string]string { return map[string]string{"PGPASSWORD": pw, "HIGHWATER_SOURCE": ""} },
			want: func(string) string { return "" }},
		{name: "S3 endpoint with user info",
			args: func(pw string) []string {
				return []string{"export", "--source", db, "--table", "items", "--primary-key", "id", "--modified-at", "updated_at",
					"--dest", "s3://bucket/lake?endpoint=" + url.QueryEscape("http://"+url.UserPassword("key", pw).String()+"@127.0.0.1:1")}
			},
			want: func(string) string { return "s3: endpoint http://key:xxxxx@127.0.0.1:1 carries user info" }},
	}
	if cs := os.Getenv(cloudtest.EnvAzure); cs != "" {
		container := cloudtest.AzureContainer(t)
		ep := regexp.MustCompile(`BlobEndpoint=[^;]+`).FindString(cs)
		scenarios = append(scenarios, scenario{name: "Azure connection string with a wrong key",
			args: func(string) []string {
				return []string{"export", "--source", db, "--table", "items", "--primary-key", "id", "--modified-at", "updated_at",
					"--dest", "azblob://" + container + "/lake"}
			},
			env: func(pw string) map[string]string {
				return map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" +
					pw + ";" + ep + ";"}
			},
			// The key is refused or malformed; either way it stays unsaid.
			want: func(string) string { return "" }})
	} else {
		t.Logf("%s is not set: the Azure case is left out", cloudtest.EnvAzure)
	}
	before := committed(t, dest)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, pw := range append(distinct, common...) {
				t.Run(fmt.Sprintf("%q", pw), func(t *testing.T) {
					if sc.env != nil {
						for k, v := range sc.env(pw) {
							t.Setenv(k, v)
						}
					}
					code, out, errOut := highwater(t, sc.args(pw)...)
					if code == 0 {
						t.Fatalf("exit 0; stderr %q", errOut)
					}
					last := lastLine(errOut)
					if !strings.Contains(last, sc.want(pw)) {
						t.Errorf("the last line of stderr does not say %q: %s", sc.want(pw), last)
					}
					all := out + errOut
					if strings.Contains(all, "REDACTED") {
						t.Errorf("a message was mangled: %s", all)
					}
					if slices.Contains(common, pw) {
						return
					}
					r := []rune(pw)
					for i := 0; i+3 <= len(r); i++ {
						if piece := string(r[i : i+3]); strings.Contains(all, piece) {
							t.Fatalf("%q, a piece of the password, was printed: %s", piece, all)
						}
					}
				})
			}
		})
	}
	if after := committed(t, dest); after != before {
		t.Fatalf("%d commits before, %d after", before, after)
	}
}
