package export_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/laketest"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// wantRefreshAsked checks that err refuses the run and asks for a full
// refresh, and that nothing was committed since seq.
func (l *lake) wantRefreshAsked(err error, seq int64) {
	l.t.Helper()
	if !errors.Is(err, export.ErrIdentity) || !strings.Contains(err.Error(), "--full-refresh") {
		l.t.Fatalf("want ErrIdentity asking for --full-refresh, got %v", err)
	}
	if st := l.state(); st.Seq != seq {
		l.t.Fatalf("refused run committed: seq %d, want %d", st.Seq, seq)
	}
}

// A table dropped and recreated under the same name is another table: its
// rows stamped below the watermark would be skipped. The run is refused;
// a full refresh adopts the new table, and later runs continue from it.
func TestRecreatedTableNeedsFullRefresh(t *testing.T) {
	for name, recreate := range map[string][]string{
		"drop and create": {`DROP TABLE items`, itemsTable},
		// What a restore from a dump does: same name, columns and rows.
		"restore": {`ALTER TABLE items RENAME TO items_saved`, itemsTable, `INSERT INTO items SELECT * FROM items_saved`, `DROP TABLE items_saved`},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'old', g FROM generate_series(1, 10) g`)
			l.mustExport(l.options())
			before := l.state()
			l.exec(recreate...)
			// Rows stamped below the watermark, which an incremental run
			// would skip without a word.
			l.exec(`INSERT INTO items SELECT g, '2025-06-01', 'new', g FROM generate_series(11, 15) g`)
			_, err := l.export(l.options())
			l.wantRefreshAsked(err, before.Seq)
			if !strings.Contains(err.Error(), "OID") {
				t.Fatalf("the refusal does not say the table changed: %v", err)
			}

			opts := l.options()
			opts.FullRefresh = true
			res := l.mustExport(opts)
			if !res.Commit.AdoptsIdentity || before.Identity.RelationOID == 0 || res.Commit.Identity.RelationOID == before.Identity.RelationOID {
				t.Fatalf("the full refresh did not adopt the new table: %+v", res.Commit.Identity)
			}
			if st := l.state(); st.Identity.RelationOID != res.Commit.Identity.RelationOID {
				t.Fatalf("state identity has OID %d, the adopting commit %d", st.Identity.RelationOID, res.Commit.Identity.RelationOID)
			}
			want := l.pgQuery(`SELECT count(*) FROM items`)
			if got := l.query(`SELECT count(*) FROM lake`); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("lake has %v rows, source %v", got, want)
			}
			// Later runs continue under the adopted identity.
			l.exec(`UPDATE items SET updated_at = now(), name = 'later' WHERE id = 11`)
			if res := l.mustExport(l.options()); res.Commit.Metrics.RowsTransferred != 1 || res.Commit.AdoptsIdentity {
				t.Fatalf("incremental run after the refresh: %d rows, adopts %v", res.Commit.Metrics.RowsTransferred, res.Commit.AdoptsIdentity)
			}
		})
	}
}

// A source restored into a new cluster has another system identifier. The
// run is refused; a full refresh adopts the new cluster, recorded in the
// log, and the old cluster is then the stranger.
func TestRestoredIntoNewClusterContinuesAfterFullRefresh(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'n', g FROM generate_series(1, 10) g`)
	first := l.mustExport(l.options())

	t.Setenv(pgtest.EnvURL, "") // a cluster of its own, even when tests share a server
	other, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	u, err := url.Parse(l.db)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, other.URL, "CREATE DATABASE "+strings.TrimPrefix(u.Path, "/"))
	restored, err := url.Parse(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	restored.Path = u.Path
	oldDB := l.db
	l.db = restored.String()
	l.exec(itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'n', g FROM generate_series(1, 10) g`,
		`INSERT INTO items SELECT g, '2025-01-01', 'restored late', g FROM generate_series(11, 12) g`)

	_, err = l.export(l.options())
	l.wantRefreshAsked(err, 1)
	opts := l.options()
	opts.FullRefresh = true
	res := l.mustExport(opts)
	if !res.Commit.AdoptsIdentity || res.Commit.Identity.SystemID == first.Commit.Identity.SystemID {
		t.Fatalf("the full refresh did not adopt the new cluster: %+v", res.Commit.Identity)
	}
	if got := l.query(`SELECT count(*) FROM lake`); fmt.Sprint(got) != "[[12]]" {
		t.Fatalf("lake has %v rows", got)
	}
	l.exec(`UPDATE items SET updated_at = now() WHERE id = 1`)
	if res := l.mustExport(l.options()); res.Commit.Metrics.RowsTransferred != 1 {
		t.Fatalf("incremental run on the new cluster read %d rows", res.Commit.Metrics.RowsTransferred)
	}
	l.db = oldDB
	if _, err := l.export(l.options()); !errors.Is(err, export.ErrIdentity) {
		t.Fatalf("the old cluster is accepted again: %v", err)
	}
}

// A log written before relation OIDs and modified-at kinds were recorded
// keeps working: the next run adopts the OID and kind it reads, and from
// then on a recreated table is caught.
func TestIdentityWithoutOIDIsAdopted(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'n', g FROM generate_series(1, 10) g`)
	l.mustExport(l.options())
	// Make the commit what an older highwater wrote: no relation_oid, no
	// modified_at_kind.
	laketest.EditJSON(t, l.commitPath(1), func(c map[string]any) {
		delete(c["identity"].(map[string]any), "relation_oid")
		delete(c["identity"].(map[string]any), "modified_at_kind")
	})
	if st := l.state(); st.Identity.RelationOID != 0 {
		t.Fatalf("the rewritten log still has OID %d", st.Identity.RelationOID)
	}

	l.exec(`UPDATE items SET updated_at = now() WHERE id = 1`)
	res := l.mustExport(l.options())
	if !res.Commit.AdoptsIdentity || res.Commit.Metrics.RowsTransferred != 1 {
		t.Fatalf("run over an OID-less log: adopts %v, %d rows", res.Commit.AdoptsIdentity, res.Commit.Metrics.RowsTransferred)
	}
	if st := l.state(); st.Identity.RelationOID == 0 || st.Identity.ModifiedAtKind != "timestamptz" {
		t.Fatalf("the state did not take the adopted OID and kind: %+v", st.Identity)
	}
	l.exec(`DROP TABLE items`, itemsTable)
	_, err := l.export(l.options())
	l.wantRefreshAsked(err, 2)
}

// A source_query is identified by its text, not by a relation: it runs
// again as the same model, another query or a table is another model, and
// a full refresh does not change that.
func TestSourceQueryIdentity(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'n', g FROM generate_series(1, 10) g`)
	opts := l.options()
	opts.Source.Table, opts.Source.Query = "", `SELECT * FROM items WHERE price > 2`
	if res := l.mustExport(opts); res.Commit.Identity.QueryHash == "" || res.Commit.Identity.RelationOID != 0 {
		t.Fatalf("query identity %+v", res.Commit.Identity)
	}
	l.exec(`UPDATE items SET updated_at = now() WHERE id = 5`)
	if res := l.mustExport(opts); res.Commit.Metrics.RowsTransferred != 1 || res.Commit.AdoptsIdentity {
		t.Fatalf("second query run: %d rows, adopts %v", res.Commit.Metrics.RowsTransferred, res.Commit.AdoptsIdentity)
	}
	changed := opts
	changed.Source.Query = `SELECT * FROM items WHERE price > 3`
	table := l.options()
	for name, o := range map[string]export.Options{"another query": changed, "a table": table} {
		for _, full := range []bool{false, true} {
			o.FullRefresh = full
			_, err := l.export(o)
			if !errors.Is(err, export.ErrIdentity) || !strings.Contains(err.Error(), "choose another --model") {
				t.Fatalf("%s (full refresh %v): want ErrIdentity, got %v", name, full, err)
			}
		}
	}
	if st := l.state(); st.Seq != 2 {
		t.Fatalf("refused runs committed: seq %d", st.Seq)
	}
}

// A modified-at column altered to another type leaves a watermark of the
// old type: the run is refused, and a full refresh adopts the new kind and
// takes its own bound as the watermark, since the old one orders nothing.
func TestModifiedAtTypeChangeAsksFullRefresh(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01', 'n', g FROM generate_series(1, 10) g`)
	if res := l.mustExport(l.options()); res.Commit.Identity.ModifiedAtKind != "timestamptz" {
		t.Fatalf("kind %q recorded", res.Commit.Identity.ModifiedAtKind)
	}
	l.exec(`ALTER TABLE items ALTER COLUMN updated_at TYPE date`)
	_, err := l.export(l.options())
	l.wantRefreshAsked(err, 1)
	opts := l.options()
	opts.FullRefresh = true
	res := l.mustExport(opts)
	if !res.Commit.AdoptsIdentity || res.Commit.Identity.ModifiedAtKind != "date" || res.Commit.Watermark == nil || strings.Contains(*res.Commit.Watermark, ":") {
		t.Fatalf("full refresh: adopts %v, kind %q, watermark %v", res.Commit.AdoptsIdentity, res.Commit.Identity.ModifiedAtKind, deref(res.Commit.Watermark))
	}
	l.exec(`UPDATE items SET updated_at = current_date WHERE id = 1`)
	if res := l.mustExport(l.options()); res.Commit.Metrics.DeltaRowsTransferred != 1 {
		t.Fatalf("incremental run after the refresh: %+v", res.Commit.Metrics)
	}
}
