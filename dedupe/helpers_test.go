package dedupe_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/laketest"

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
	res, err := dedupe.Run(ctx, d, d.ObjectURL, opts)
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
	db := laketest.DuckDB(t, paths)
	if len(paths) == 0 {
		if _, err := db.Exec("CREATE VIEW lake AS SELECT NULL::BIGINT AS id WHERE false"); err != nil {
			t.Fatal(err)
		}
	}
	return laketest.Query(t, db, strings.ReplaceAll(q, "$FILES", laketest.FileList(paths)))
}

func scalar(t *testing.T, rows [][]string) string {
	t.Helper()
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("want one value, got %v", rows)
	}
	return rows[0][0]
}
