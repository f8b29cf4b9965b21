package export_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/faults"
	"github.com/highwater-dev/highwater/internal/laketest"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/jackc/pgx/v5"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// lake is one test's source database and local destination.
type lake struct {
	t     *testing.T
	db    string // source URL
	dir   string // destination directory
	model string
}

func newLake(t *testing.T, setup ...string) *lake {
	t.Helper()
	return &lake{t: t, db: pg.NewDatabase(t, setup...), dir: t.TempDir(), model: "items"}
}

func (l *lake) destURL() string { return "file://" + l.dir }

func (l *lake) exec(sql ...string) {
	l.t.Helper()
	pgtest.Exec(l.t, l.db, sql...)
}

// options are the usual ones for the table "items" (id, updated_at).
func (l *lake) options() export.Options {
	return export.Options{
		Model:    l.model,
		Source:   pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"},
		Lookback: 0,
	}
}

func (l *lake) export(opts export.Options) (*export.Result, error) {
	l.t.Helper()
	return l.exportThrough(nil, opts)
}

// exportThrough is export into the lake's bucket behind fb, which it
// points at the bucket; with a nil fb it is export.
func (l *lake) exportThrough(fb *faults.Bucket, opts export.Options) (*export.Result, error) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := pgsource.Connect(ctx, l.db)
	if err != nil {
		return nil, err
	}
	defer src.Close(ctx)
	d, err := destination.Open(ctx, l.destURL(), "")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var b objstore.Bucket = d
	if fb != nil {
		fb.Bucket, b = d, fb
	}
	return export.Run(ctx, src, b, d.ObjectURL, opts)
}

func (l *lake) mustExport(opts export.Options) *export.Result {
	l.t.Helper()
	res, err := l.export(opts)
	if err != nil {
		l.t.Fatalf("export: %v", err)
	}
	return res
}

func (l *lake) state() *manifest.State {
	l.t.Helper()
	d := l.openDest()
	st, err := manifest.NewLog(d, l.model).ReadState(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

// committedPaths lists the local paths of the committed files.
func (l *lake) committedPaths() []string {
	var paths []string
	for _, f := range l.state().Files {
		paths = append(paths, filepath.Join(l.dir, l.model, filepath.FromSlash(f.Key)))
	}
	return paths
}

// query runs SQL in DuckDB over the committed files, exposed as the view
// lake, and returns the rows as strings.
func (l *lake) query(q string) [][]string {
	l.t.Helper()
	paths := l.committedPaths()
	if len(paths) == 0 {
		l.t.Fatalf("no committed files")
	}
	return laketest.Query(l.t, laketest.DuckDB(l.t, paths), q)
}

// source connects to the lake's source database; the caller closes it.
func (l *lake) source(ctx context.Context) *pgsource.Source {
	l.t.Helper()
	src, err := pgsource.Connect(ctx, l.db)
	if err != nil {
		l.t.Fatal(err)
	}
	return src
}

// pgQuery returns rows of a source query as strings.
func (l *lake) pgQuery(q string) [][]string {
	l.t.Helper()
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	// The source session pins search_path to pg_catalog; tests name
	// their tables unqualified.
	if _, err := src.Conn().Exec(ctx, "SET search_path TO DEFAULT"); err != nil {
		l.t.Fatal(err)
	}
	rows, err := src.Conn().Query(ctx, q)
	if err != nil {
		l.t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			l.t.Fatal(err)
		}
		rec := make([]string, len(vals))
		for i, v := range vals {
			rec[i] = laketest.String(v)
		}
		out = append(out, rec)
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

func (l *lake) connect() *pgx.Conn {
	l.t.Helper()
	conn, err := pgx.Connect(l.t.Context(), l.db)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
