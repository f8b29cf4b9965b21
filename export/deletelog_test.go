package export_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/pgsource"
)

// installDeleteLog installs the delete log on a table of the lake's source.
func (l *lake) installDeleteLog(spec pgsource.InstallSpec) {
	l.t.Helper()
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	if _, err := src.InstallDeleteLog(ctx, spec); err != nil {
		l.t.Fatalf("install the delete log: %v", err)
	}
}

func (l *lake) uninstallDeleteLog() {
	l.t.Helper()
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	if _, err := src.UninstallDeleteLog(ctx, "public.items"); err != nil {
		l.t.Fatalf("uninstall the delete log: %v", err)
	}
}

func (l *lake) pruneDeleteLog() {
	l.t.Helper()
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	if _, _, err := src.PruneDeleteLog(ctx, 1); err != nil {
		l.t.Fatalf("prune the delete log: %v", err)
	}
}

func (l *lake) deleteLogOptions() export.Options {
	o := l.options()
	o.DeleteLog = true
	return o
}

// TestDeleteLogOverSeveralExports: hard deletes reach the lake through the
// log, including a key deleted and re-inserted between two runs, one
// deleted and re-inserted in one transaction (whose row is stamped before
// the delete), a key changed by an UPDATE, and keys deleted twice.
func TestDeleteLogOverSeveralExports(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 300) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	opts := l.deleteLogOptions()
	opts.PageRows = 7 // several keyset pages of the log
	l.mustExport(opts)
	steps := [][]string{
		{`DELETE FROM items WHERE id % 10 = 1`, `UPDATE items SET name = name || '+', updated_at = clock_timestamp() WHERE id % 10 = 2`},
		{`DELETE FROM items WHERE id % 10 = 3`, `INSERT INTO items VALUES (11, clock_timestamp(), 'back', 0)`,
			`BEGIN; DELETE FROM items WHERE id = 25; INSERT INTO items VALUES (25, now(), 'same tx', 0); COMMIT`,
			`UPDATE items SET id = id + 1000, updated_at = clock_timestamp() WHERE id IN (44, 45)`},
		{`DELETE FROM items WHERE id = 11`, `INSERT INTO items VALUES (21, clock_timestamp(), 'again', 0)`, `DELETE FROM items WHERE id % 10 = 7`},
	}
	// Run 3: the 30 of id % 10 = 3 and the old keys 44 and 45; 11 is back
	// and 25 was deleted and re-inserted at once, so neither is a tombstone.
	wantTombs := []int64{30, 32, 31}
	for i, sql := range steps {
		l.exec(sql...)
		c := l.mustExport(opts).Commit
		if got := c.Metrics.DeletesTransferred; got != wantTombs[i] {
			t.Errorf("run %d wrote %d tombstones, want %d", i+2, got, wantTombs[i])
		}
	}
	l.dedupe()
	if got, want := l.liveRows(), l.sourceRows("true"); !slices.Equal(got, want) {
		t.Fatalf("after dedupe the lake's live rows are\n%v\nthe source's\n%v", got, want)
	}
}

// TestDeleteLogLateCommit: a delete whose transaction is open across a
// run is stamped before that run's upper bound but committed after it;
// the open-transaction bound keeps the next run's from below it.
func TestDeleteLogLateCommit(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 20) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	opts := l.deleteLogOptions()
	l.mustExport(opts)
	conn := l.connect()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `DELETE FROM items WHERE id IN (3, 4)`); err != nil {
		t.Fatal(err)
	}
	l.exec(`DELETE FROM items WHERE id = 5`)
	if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 0 {
		t.Fatalf("the run with the delete still open wrote %d tombstones; the bound should hold back before it", got)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 3 {
		t.Fatalf("the run after the late commit wrote %d tombstones, want 3", got)
	}
	l.dedupe()
	if got, want := l.liveRows(), l.sourceRows("true"); !slices.Equal(got, want) {
		t.Fatalf("live rows %v, want %v", got, want)
	}
}

// TestDeleteLogCompositeAwkwardKeys: tombstones of a composite key of
// types whose text forms are easy to get wrong remove exactly their keys,
// for each kind of modified-at column.
func TestDeleteLogCompositeAwkwardKeys(t *testing.T) {
	for _, mod := range []string{"timestamptz", "timestamp", "date"} {
		t.Run(mod, func(t *testing.T) {
			l := newLake(t, `CREATE TABLE items (n numeric, ts timestamptz, t text, f float8, u uuid,
				updated_at `+mod+` NOT NULL DEFAULT now(), name text, PRIMARY KEY (n, ts, t, f, u))`,
				`INSERT INTO items (n, ts, t, f, u, name) SELECT g / 7.0, '2026-01-01 00:00:00.000001+05'::timestamptz + g * interval '1.5 s',
					'k,"' || g, 1.0 / g, md5(g::text)::uuid, 'n' || g FROM generate_series(1, 60) g`,
				`SET TimeZone = 'Asia/Kolkata'`)
			l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
			opts := l.deleteLogOptions()
			opts.Source.PrimaryKey = []string{"t", "n", "ts", "f", "u"} // another order than the log's
			opts.TimeZone = "Asia/Kolkata"
			l.mustExport(opts)
			l.exec(`SET DateStyle = 'German'; SET extra_float_digits = 0; DELETE FROM items WHERE name ~ '[37]$'`)
			if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 12 {
				t.Fatalf("wrote %d tombstones, want 12", got)
			}
			l.dedupe()
			lake := l.query(`SELECT t, n::text, f FROM lake WHERE NOT _hw_deleted ORDER BY t`)
			src := l.pgQuery(`SELECT t, n::text, f FROM items ORDER BY t COLLATE "C"`)
			if !slices.EqualFunc(lake, src, slices.Equal) {
				t.Fatalf("lake keys\n%v\nsource keys\n%v", lake, src)
			}
		})
	}
}

// TestDeleteLogTenants: each tenant's deletes reach its own lake only.
func TestDeleteLogTenants(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, account text NOT NULL, updated_at timestamptz NOT NULL, name text)`,
		`INSERT INTO items SELECT g, CASE WHEN g % 2 = 0 THEN 'acme' ELSE 'globex' END, now(), 'n' || g FROM generate_series(1, 40) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items", TenantColumn: "account"})
	lakes := map[string]*lake{}
	for _, tenant := range []string{"acme", "globex"} {
		tl := &lake{t: t, db: l.db, dir: t.TempDir(), model: "items"}
		lakes[tenant] = tl
		o := tl.deleteLogOptions()
		o.Source.TenantColumn, o.Source.Tenant = "account", &tenant
		tl.mustExport(o)
		l.exec(`DELETE FROM items WHERE id IN (4, 8, 9)`) // two of acme's, one of globex's, before each run
		tl.mustExport(o)
		tl.mustExport(o) // nothing new
		tl.dedupe()
		if got, want := tl.liveRows(), tl.sourceRows("account = '"+tenant+"'"); !slices.Equal(got, want) {
			t.Fatalf("%s's live rows %v, want %v", tenant, got, want)
		}
		if tenant == "globex" {
			for _, r := range tl.query(`SELECT id FROM lake WHERE _hw_deleted`) {
				if r[0] != "9" {
					t.Fatalf("globex's lake holds a tombstone of key %s, not its own", r[0])
				}
			}
		}
	}
	// The tenant column must be the log's.
	o := lakes["acme"].deleteLogOptions()
	o.Source.TenantColumn, o.Source.Tenant = "name", new(string)
	o.Model = "other"
	if _, err := lakes["acme"].export(o); !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), `tenant column "account", not the model's "name"`) {
		t.Fatalf("want an error naming the log's tenant column, got %v", err)
	}
}

// TestDeleteLogRetention: a prune past the run's lower bound, and a
// TRUNCATE after the watermark, stop the run with one line and commit
// nothing; a full refresh rebuilds the baseline and the runs continue.
func TestDeleteLogRetention(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		line      *regexp.Regexp
	}{
		{"prune", "", regexp.MustCompile(`^the delete log of public\.items was pruned up to [0-9-]+ [0-9:.]+\+00, past this run's lower bound [0-9-]+ [0-9:.]+\+00; run --full-refresh to rebuild the baseline$`)},
		{"reinstall", "", regexp.MustCompile(`^the delete log of public\.items was installed at [0-9-]+ [0-9:.]+\+00, after the watermark [0-9-]+ [0-9:.]+\+00, so deletes before it were not recorded; run --full-refresh to rebuild the baseline$`)},
		{"truncate", "TRUNCATE items", regexp.MustCompile(`^the delete log of public\.items records a TRUNCATE at [0-9-]+ [0-9:.]+\+00, after the watermark [0-9-]+ [0-9:.]+\+00, which left no entry per row; run --full-refresh to rebuild the baseline$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 50) g`)
			l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
			opts := l.deleteLogOptions()
			l.mustExport(opts)
			l.exec(`DELETE FROM items WHERE id <= 10`)
			switch tc.name {
			case "truncate":
				l.exec(tc.sql, `INSERT INTO items SELECT g, now(), 'new' || g, g FROM generate_series(100, 104) g`)
			case "prune":
				l.pruneDeleteLog()
			case "reinstall":
				// Deletes while the log was off are recorded nowhere.
				l.uninstallDeleteLog()
				l.exec(`DELETE FROM items WHERE id = 15`, `INSERT INTO items SELECT g, now(), 'new' || g, g FROM generate_series(100, 104) g`)
				l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
			}
			seq := l.state().Seq
			for range 2 {
				_, err := l.export(opts)
				if !errors.Is(err, pgsource.ErrDeleteLogGap) || !tc.line.MatchString(err.Error()) {
					t.Fatalf("want the retention line, got %v", err)
				}
				if st := l.state(); st.Seq != seq {
					t.Fatalf("the stopped run committed seq %d", st.Seq)
				}
			}
			full := opts
			full.FullRefresh = true
			l.mustExport(full)
			l.exec(`DELETE FROM items WHERE id IN (20, 21, 101, 102)`) // two of them exist in each case
			want := int64(2)
			if tc.name == "reinstall" {
				want = 4
			}
			if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != want {
				t.Fatalf("the run after the full refresh wrote %d tombstones, want %d", got, want)
			}
			l.dedupe()
			if got, want := l.liveRows(), l.sourceRows("true"); !slices.Equal(got, want) {
				t.Fatalf("live rows %v, want %v", got, want)
			}
		})
	}
}

// TestDeleteLogBadInput: the log not installed, and turning it on for a
// model exported without, stop before anything is committed.
func TestDeleteLogBadInput(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 5) g`)
	_, err := l.export(l.deleteLogOptions())
	if !errors.Is(err, pgsource.ErrNoDeleteLog) || !strings.Contains(err.Error(), "highwater deletes install --source URL --table public.items") {
		t.Fatalf("want an error saying how to install the log, got %v", err)
	}
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("committed seq %d", st.Seq)
	}
	l.mustExport(l.options())
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	if _, err := l.export(l.deleteLogOptions()); !errors.Is(err, export.ErrIdentity) || !strings.Contains(err.Error(), "delete log off, not on") {
		t.Fatalf("want ErrIdentity for turning the log on, got %v", err)
	}
}

// TestDeleteLogPrunedWhileRead: a prune that commits between two pages of
// the log takes entries the run has not read yet; the check after the
// read sees its horizon and stops the run before it commits.
func TestDeleteLogPrunedWhileRead(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 50) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	opts := l.deleteLogOptions()
	l.mustExport(opts)
	l.exec(`DELETE FROM items WHERE id <= 20`)
	opts.PageRows = 5
	pruned := false
	opts.Failpoint = func(name string) {
		if name == "after-tombstone-page" && !pruned {
			pruned = true
			l.pruneDeleteLog()
		}
	}
	seq := l.state().Seq
	if _, err := l.export(opts); !errors.Is(err, pgsource.ErrDeleteLogGap) {
		t.Fatalf("want the run stopped by the prune it raced, got %v", err)
	}
	if !pruned {
		t.Fatal("the log was never pruned")
	}
	if st := l.state(); st.Seq != seq {
		t.Fatalf("the run committed seq %d", st.Seq)
	}
}
