// Package laketest reads a lake the way an analyst would, for tests: DuckDB
// over the committed Parquet files, with every value turned into a string
// that compares the same way whatever the reader's Go type.
package laketest

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" driver
)

// DuckDB opens an in-memory DuckDB, in UTC, where the view lake reads the
// files with union_by_name, as engines read a model whose schema evolved.
func DuckDB(t testing.TB, paths []string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		return db
	}
	if _, err := db.Exec("CREATE VIEW lake AS SELECT * FROM read_parquet([" + FileList(paths) + "], union_by_name = true)"); err != nil {
		t.Fatalf("create the lake view: %v", err)
	}
	return db
}

// FileList quotes paths as a DuckDB list's elements.
func FileList(paths []string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return strings.Join(quoted, ",")
}

// Query runs q and returns its rows as strings (see String).
func Query(t testing.TB, db *sql.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		rec := make([]string, len(vals))
		for i, v := range vals {
			rec[i] = String(v)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// String formats one value: NULL for nil, timestamps in UTC with their
// microseconds and no trailing zeros, anything else as fmt prints it.
func String(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999")
	}
	return fmt.Sprint(v)
}
