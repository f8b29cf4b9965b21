package iceberg_test

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/iceberg"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/icebergtest"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// lake is one test's source database and destination.
type lake struct {
	t     *testing.T
	db    string
	dest  string
	props map[string]string // iceberg-go's file system properties
	model string
}

func newLake(t *testing.T, dest string, setup ...string) *lake {
	t.Helper()
	if dest == "" {
		dest = "file://" + t.TempDir()
	}
	return &lake{t: t, db: pg.NewDatabase(t, setup...), dest: dest, model: "items"}
}

func (l *lake) exec(sql ...string) { l.t.Helper(); pgtest.Exec(l.t, l.db, sql...) }

func (l *lake) open() *destination.Destination {
	l.t.Helper()
	d, err := destination.Open(context.Background(), l.dest, "")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { d.Close() })
	return d
}

func (l *lake) export(full bool) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := pgsource.Connect(ctx, l.db)
	if err != nil {
		l.t.Fatal(err)
	}
	defer src.Close(ctx)
	d := l.open()
	_, err = export.Run(ctx, src, d, d.ObjectURL, export.Options{Model: l.model, FullRefresh: full,
		Source: pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}})
	if err != nil {
		l.t.Fatalf("export: %v", err)
	}
}

func (l *lake) dedupe() {
	l.t.Helper()
	d := l.open()
	if _, err := dedupe.Run(context.Background(), d, d.ObjectURL, dedupe.Options{Model: l.model, TempDir: l.t.TempDir()}); err != nil {
		l.t.Fatalf("dedupe: %v", err)
	}
}

func (l *lake) view() *iceberg.View {
	d := l.open()
	log := manifest.NewLog(d, l.model)
	return iceberg.NewView(log, d.ObjectURL(log.Key()))
}

func (l *lake) sync() *iceberg.Result {
	l.t.Helper()
	res, err := l.view().Sync(context.Background(), nil)
	if err != nil {
		l.t.Fatalf("sync: %v", err)
	}
	return res
}

func (l *lake) location() string { return l.view().Location() }

func (l *lake) table() *table.Table { return icebergtest.Open(l.t, l.location(), l.props) }

// compare reads the table back with iceberg-go given only its location and
// checks that the newest version of every key is the source's row.
func (l *lake) compare(cols ...string) {
	l.t.Helper()
	rows := icebergtest.Rows(l.t, l.table(), 0)
	got := icebergtest.Latest(rows, "id", "updated_at")
	want := l.source(cols)
	if len(got) != len(want) {
		l.t.Fatalf("the Iceberg table has %d keys, the source %d:\n%v\n%v", len(got), len(want), got, want)
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			l.t.Fatalf("key %s is missing from the Iceberg table", id)
		}
		for _, c := range cols {
			if g[c] != w[c] {
				l.t.Errorf("key %s column %s: Iceberg reads %q, PostgreSQL has %q", id, c, g[c], w[c])
			}
		}
	}
}

// source reads the columns of items as text in the formats of
// icebergtest.Format.
func (l *lake) source(cols []string) map[string]map[string]string {
	l.t.Helper()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		switch c {
		case "updated_at":
			exprs[i] = "to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
		case "at":
			exprs[i] = "to_char(at, 'YYYY-MM-DD HH24:MI:SS.US')"
		default:
			exprs[i] = `"` + c + `"::text`
		}
		exprs[i] = "coalesce(" + exprs[i] + ", 'NULL')"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, l.db)
	if err != nil {
		l.t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM items")
	if err != nil {
		l.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]string{}
	for rows.Next() {
		vals := make([]string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			l.t.Fatal(err)
		}
		r := map[string]string{}
		for i, c := range cols {
			r[c] = vals[i]
		}
		out[r["id"]] = r
	}
	if err := rows.Err(); err != nil {
		l.t.Fatal(err)
	}
	return out
}

// snapshotSeqs lists the highwater seq of every live snapshot, oldest first.
func snapshotSeqs(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	var seqs []string
	snaps := tbl.Metadata().Snapshots()
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].SequenceNumber < snaps[j].SequenceNumber })
	for _, s := range snaps {
		seqs = append(seqs, s.Summary.Properties[iceberg.SummarySeq])
	}
	return seqs
}
