package main

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestDedupeKeepsTheLakesCompression checks, with DuckDB reading the
// footers, that a dedupe without --compression writes its output in the
// codec of the lake's newest committed file, and that --compression
// changes it.
func TestDedupeKeepsTheLakesCompression(t *testing.T) {
	db, dest := setupItems(t)
	duck, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer duck.Close()
	export := func(codec string) {
		t.Helper()
		pgtest.Exec(t, db, `UPDATE items SET name = name || '+', updated_at = now() WHERE id % 7 = 0`)
		if code, _, errOut := highwater(t, "export", "--source", db, "--table", "public.items", "--primary-key", "id",
			"--modified-at", "updated_at", "--dest", dest, "--compression", codec); code != 0 {
			t.Fatalf("export --compression %s: %s", codec, errOut)
		}
	}
	// codecs returns the codecs of the committed files' column chunks.
	codecs := func() []string {
		t.Helper()
		code, out, errOut := highwater(t, "files", "--dest", dest, "--model", "items")
		if code != 0 {
			t.Fatalf("files: %s", errOut)
		}
		var paths []string
		for _, u := range strings.Fields(out) {
			paths = append(paths, "'"+strings.TrimPrefix(u, "file://")+"'")
		}
		rows, err := duck.Query(`SELECT DISTINCT compression FROM parquet_metadata([` + strings.Join(paths, ",") + `]) ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
		return got
	}
	dedupe := func(extra ...string) {
		t.Helper()
		if code, _, errOut := highwater(t, append([]string{"dedupe", "--dest", dest, "--model", "items"}, extra...)...); code != 0 {
			t.Fatalf("dedupe %q: %s", extra, errOut)
		}
	}
	for _, step := range []struct {
		export []string // the codecs of the exports before the dedupe
		flags  []string
		want   string
	}{
		{[]string{"snappy", "snappy"}, nil, "SNAPPY"},
		// The newest file's codec is the lake's current choice.
		{[]string{"none", "gzip"}, nil, "GZIP"},
		{[]string{"gzip"}, []string{"--compression", "zstd"}, "ZSTD"},
		{[]string{"zstd"}, []string{"--compression", "none"}, "UNCOMPRESSED"},
		{[]string{"snappy"}, nil, "SNAPPY"},
	} {
		for _, c := range step.export {
			export(c)
		}
		dedupe(step.flags...)
		if got := codecs(); len(got) != 1 || got[0] != step.want {
			t.Fatalf("after exports %q and dedupe %q the committed files are in %q, want %s", step.export, step.flags, got, step.want)
		}
	}
}
