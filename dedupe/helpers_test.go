package dedupe_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/manifest"
)

// openDest opens a destination URL for a test.
func openDest(t *testing.T, url string) *destination.Destination {
	t.Helper()
	d, err := destination.Open(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func readState(t *testing.T, d *destination.Destination, model string) *manifest.State {
	t.Helper()
	st, err := manifest.NewLog(d, model).ReadState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func runDedupe(t *testing.T, d *destination.Destination, opts dedupe.Options) *dedupe.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := dedupe.Run(ctx, d, opts)
	if err != nil {
		t.Fatalf("dedupe: %v", err)
	}
	return res
}

// localCopies downloads the committed files of model into a temp dir, so
// that DuckDB reads them whatever the store.
func localCopies(t *testing.T, d *destination.Destination, model string) []string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	log := manifest.NewLog(d, model)
	var paths []string
	for i, f := range readState(t, d, model).Files {
		rc, err := d.Get(ctx, log.Key(f.Key))
		if err != nil {
			t.Fatalf("get %s: %v", f.Key, err)
		}
		p := filepath.Join(dir, fmt.Sprintf("f%05d.parquet", i))
		out, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		out.Close()
		paths = append(paths, p)
	}
	return paths
}

// duck runs q in DuckDB with the committed set of model as the view lake
// (and $FILES replaced by the list of its files) and returns the rows as
// strings.
func duck(t *testing.T, d *destination.Destination, model, q string) [][]string {
	t.Helper()
	paths := localCopies(t, d, model)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	view := "CREATE VIEW lake AS SELECT * FROM read_parquet([" + strings.Join(quoted, ",") + "], union_by_name = true)"
	if len(paths) == 0 {
		view = "CREATE VIEW lake AS SELECT NULL::BIGINT AS id WHERE false"
	}
	if _, err := db.Exec(view); err != nil {
		t.Fatal(err)
	}
	return queryRows(t, db, strings.ReplaceAll(q, "$FILES", strings.Join(quoted, ",")))
}

func queryRows(t *testing.T, db *sql.DB, q string) [][]string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
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
		rec := make([]string, len(cols))
		for i, v := range vals {
			switch x := v.(type) {
			case nil:
				rec[i] = "NULL"
			case time.Time:
				rec[i] = x.UTC().Format("2006-01-02 15:04:05.999999")
			default:
				rec[i] = fmt.Sprint(x)
			}
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func scalar(t *testing.T, rows [][]string) string {
	t.Helper()
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("want one value, got %v", rows)
	}
	return rows[0][0]
}
