package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/laketest"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// typesTable covers the main types of the mapping, identifiers that need
// quoting, and (after the second export) a column added later.
var typesTable = []string{
	`CREATE TABLE "Types" (
		id bigint PRIMARY KEY,
		updated_at timestamptz NOT NULL,
		i integer, s smallint, n numeric(12,2), big numeric(30,5), anynum numeric,
		r real, d double precision, b boolean, t text, v varchar(10), by bytea,
		dt date, ts timestamp, u uuid, j jsonb, ia integer[], ta text[],
		"Mixed Case" text, "odd""name" int)`,
	`INSERT INTO "Types" SELECT g, now() - interval '1 hour',
		g * 10, g::smallint, g + 0.25, g * 1000000000000.5, g / 3.0,
		g / 4.0, g / 8.0, g % 2 = 0, 'text ' || g, 'v' || g, decode(lpad(to_hex(g), 4, '0'), 'hex'),
		date '2024-01-01' + g, timestamp '2024-01-01 00:00:00.123456' + g * interval '1 hour',
		md5(g::text)::uuid, jsonb_build_object('g', g), ARRAY[g, NULL, g + 1], ARRAY['a' || g],
		'm' || g, -g
	FROM generate_series(1, 40) g`,
	`UPDATE "Types" SET i = NULL, t = NULL, ia = NULL WHERE id = 7`,
}

func TestDDL(t *testing.T) {
	db := pg.NewDatabase(t, typesTable...)
	dir := t.TempDir()
	dest := "file://" + dir
	exportArgs := []string{"export", "--source", db, "--table", `public."Types"`, "--primary-key", "id",
		"--modified-at", "updated_at", "--dest", dest, "--model", "types"}
	if code, _, errOut := highwater(t, exportArgs...); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	// A column added after the first run: the DDL must name it, and the
	// rows of the first file read it as NULL.
	pgtest.Exec(t, db, `ALTER TABLE "Types" ADD COLUMN added int`,
		`UPDATE "Types" SET added = id * 2, updated_at = now() WHERE id > 30`)
	if code, _, errOut := highwater(t, exportArgs...); code != 0 {
		t.Fatalf("second export: %s", errOut)
	}
	_, files, _ := highwater(t, "files", "--dest", dest, "--model", "types")

	for _, engine := range []string{"athena", "spark"} {
		t.Run(engine, func(t *testing.T) {
			code, out, errOut := highwater(t, "ddl", "--dest", dest, "--model", "types", "--engine", engine, "--table-name", "lake_types")
			if code != 0 {
				t.Fatalf("ddl: exit %d: %s", code, errOut)
			}
			for _, f := range strings.Fields(files) {
				if engine == "spark" && !strings.Contains(out, `"`+f+`"`) {
					t.Errorf("the Spark DDL does not read %s", f)
				}
			}
			checkGolden(t, filepath.Join("testdata", "ddl", engine+".golden"), normalize(out, dir))
		})
	}

	t.Run("duckdb", func(t *testing.T) {
		code, out, errOut := highwater(t, "ddl", "--dest", dest, "--model", "types", "--engine", "duckdb")
		if code != 0 {
			t.Fatalf("ddl: exit %d: %s", code, errOut)
		}
		if n := strings.Count(out, ".parquet'"); n != 2 {
			t.Fatalf("the DuckDB view reads %d files, want 2:\n%s", n, out)
		}
		want := pgRows(t, db, `SELECT id::text, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), i::text, s::text, n::text, big::text, anynum::text,
			r::text, d::text, b::text, t, v, encode(by, 'hex'), dt::text, to_char(ts, 'YYYY-MM-DD HH24:MI:SS.US'), u::text, j::text,
			array_to_string(ia, ',', 'NULL'), array_to_string(ta, ','), "Mixed Case", "odd""name"::text, added::text
			FROM "Types" ORDER BY "Types".id`)
		got := duckRows(t, out, `SELECT CAST(id AS VARCHAR), strftime(updated_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S.%f'), CAST(i AS VARCHAR), CAST(s AS VARCHAR), CAST(n AS VARCHAR), CAST(big AS VARCHAR), anynum,
			regexp_replace(CAST(r AS VARCHAR), '\.0$', ''), regexp_replace(CAST(d AS VARCHAR), '\.0$', ''), CAST(b AS VARCHAR), t, v, lower(hex("by")), CAST(dt AS VARCHAR), strftime(ts, '%Y-%m-%d %H:%M:%S.%f'), u, j,
			array_to_string(list_transform(ia, x -> coalesce(CAST(x AS VARCHAR), 'NULL')), ','), array_to_string(ta, ','), "Mixed Case", CAST("odd""name" AS VARCHAR), CAST(added AS VARCHAR)
			FROM "types"
			-- the lake keeps every exported version: the latest one is the row
			QUALIFY row_number() OVER (PARTITION BY id ORDER BY updated_at DESC, _hw_version DESC) = 1
			ORDER BY id`)
		if len(got) != 40 || len(want) != 40 {
			t.Fatalf("DuckDB returned %d rows, PostgreSQL %d; want 40", len(got), len(want))
		}
		for i := range want {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Errorf("row %d:\nduckdb   %q\npostgres %q", i, got[i], want[i])
			}
		}
		if got[0][21] != "NULL" || got[39][21] != "80" {
			t.Errorf("added column: first row %q, last row %q; want NULL and 80", got[0][21], got[39][21])
		}
	})
}

func TestDDLBadInput(t *testing.T) {
	dest := "file://" + t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"ddl", "--dest", dest, "--model", "m"}, 2, "--engine"},
		{[]string{"ddl", "--dest", dest, "--model", "m", "--engine", "hive"}, 2, `unknown engine "hive"`},
		{[]string{"ddl", "--dest", dest, "--model", "m", "--engine", "duckdb"}, 1, `model "m" has no commits`},
	} {
		code, _, errOut := highwater(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, %q; want exit %d mentioning %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

// normalize replaces what differs between runs: the lake's directory, the
// run and attempt ids.
func normalize(s, dir string) string {
	s = strings.ReplaceAll(s, dir, "<DEST>")
	return regexp.MustCompile(`data/[^/]+/[^/]+/part-`).ReplaceAllString(s, "data/<RUN>/<ATTEMPT>/part-")
}

// checkGolden compares got with the golden file at path; -update rewrites
// it instead.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (rerun with -update if the change is intended):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func pgRows(t *testing.T, db, q string) [][]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stringsOf(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// duckRows runs the generated DDL, then q, in a fresh DuckDB.
func duckRows(t *testing.T, ddl, q string) [][]string {
	t.Helper()
	db := laketest.DuckDB(t, nil)
	if _, err := db.Exec(ddl); err != nil {
		t.Fatalf("run the DuckDB DDL: %v\n%s", err, ddl)
	}
	return laketest.Query(t, db, q)
}

func stringsOf(vals []any) []string {
	rec := make([]string, len(vals))
	for i, v := range vals {
		rec[i] = laketest.String(v)
	}
	return rec
}
