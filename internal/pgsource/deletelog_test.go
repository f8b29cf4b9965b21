package pgsource_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/watermark"
)

// awkwardKeys is a table whose composite key mixes types whose text forms
// depend on session settings or lose precision through a float: every
// entry must read back, by the column's own equality, as the deleted key.
const awkwardKeys = `CREATE TABLE awk (
	n numeric, f float8, ts timestamptz, d date, iv interval, b bytea, t text, u uuid, big int8,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (n, f, ts, d, iv, b, t, u, big))`

func TestDeleteLogInstallIsIdempotentAndLossless(t *testing.T) {
	src, db := open(t, awkwardKeys,
		`INSERT INTO awk (n, f, ts, d, iv, b, t, u, big) VALUES
			(1.10, 1.0 / 3, '2026-03-01 12:00:00.123456+02', '0044-03-15 BC', '1 mon 2 days 3 h 4.5 s', '\x00ff', 'a,b"c} ', gen_random_uuid(), 9007199254740993),
			(-0.000000001, 1e300, 'infinity', 'infinity', '-1 year', '', '', gen_random_uuid(), -9223372036854775808),
			(123456789012345678901234567890.123456789, 'NaN', '-infinity', '2026-01-01', '0', '\x5c', e'\n\t', gen_random_uuid(), 0)`,
		`CREATE TABLE snapshot AS SELECT n, f, ts, d, iv, b, t, u, big FROM awk`)
	ctx := t.Context()
	spec := pgsource.InstallSpec{Table: "awk"}
	for range 2 {
		reg, err := src.InstallDeleteLog(ctx, spec)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		if want := []string{"n", "f", "ts", "d", "iv", "b", "t", "u", "big"}; !slices.Equal(reg.KeyColumns, want) || len(reg.Triggers) != 3 {
			t.Fatalf("installed key %v and triggers %v", reg.KeyColumns, reg.Triggers)
		}
	}
	// The deleting session's own settings must not change the text forms.
	conn := connect(t, db)
	if _, err := conn.Exec(ctx, `SET DateStyle = 'SQL, DMY'; SET TimeZone = 'Asia/Kathmandu'; SET IntervalStyle = 'sql_standard'; SET extra_float_digits = -15; SET bytea_output = 'escape'; DELETE FROM awk; RESET ALL`); err != nil {
		t.Fatal(err)
	}
	// Each entry cast back by the column's type equals a deleted key.
	var matched int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM highwater.delete_log l JOIN snapshot s ON
		(s.n, s.f, s.ts, s.d, s.iv, s.b, s.t, s.u, s.big) = (l.key[1]::numeric, l.key[2]::float8, l.key[3]::timestamptz, l.key[4]::date,
			l.key[5]::interval, l.key[6]::bytea, l.key[7], l.key[8]::uuid, l.key[9]::int8)
		AND s.n::text = l.key[1]`).Scan(&matched); err != nil {
		t.Fatal(err)
	}
	if matched != 3 {
		t.Fatalf("%d of 3 entries read back as the deleted keys", matched)
	}
	st, err := src.DeleteLogStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Installed || len(st.Tables) != 1 || st.Tables[0].Entries != 3 || st.Tables[0].Oldest == nil || st.Tables[0].PrunedTo != nil {
		t.Fatalf("status %+v", st)
	}
	// A key change removes the old key as a delete does; another update
	// leaves nothing.
	pgtest.Exec(t, db, `INSERT INTO awk (n, f, ts, d, iv, b, t, u, big) VALUES (1, 1, now(), now(), '1 s', '', 'x', gen_random_uuid(), 1)`,
		`UPDATE awk SET updated_at = now()`, `UPDATE awk SET big = 2`, `TRUNCATE awk`)
	if st, err = src.DeleteLogStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if tb := st.Tables[0]; tb.Entries != 4 || tb.Truncates != 1 {
		t.Fatalf("after a key change and a TRUNCATE: %d entries and %d truncates, want 4 and 1", tb.Entries, tb.Truncates)
	}
	horizon, n, err := src.PruneDeleteLog(ctx, time.Nanosecond)
	if err != nil || n != 5 {
		t.Fatalf("prune: %d deleted, %v", n, err)
	}
	if st, err = src.DeleteLogStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if tb := st.Tables[0]; tb.PrunedTo == nil || !tb.PrunedTo.Equal(horizon) || tb.Entries != 0 {
		t.Fatalf("after prune: %+v, horizon %s", tb, horizon)
	}
	// Pruning less far never moves the horizon back.
	if _, _, err := src.PruneDeleteLog(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if st, _ = src.DeleteLogStatus(ctx); !st.Tables[0].PrunedTo.Equal(horizon) {
		t.Fatalf("a shallower prune moved the horizon from %s to %s", horizon, st.Tables[0].PrunedTo)
	}
	if _, err := src.UninstallDeleteLog(ctx, "awk"); err != nil {
		t.Fatal(err)
	}
	if st, _ = src.DeleteLogStatus(ctx); len(st.Tables) != 0 {
		t.Fatalf("after uninstall: %+v", st.Tables)
	}
	if holds(t, conn, "EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'awk'::regclass AND NOT tgisinternal)") {
		t.Fatal("uninstall left a trigger")
	}
}

// TestDeleteLogPrivileges: a role that may not create triggers is told
// so in one line, and nothing is installed; a role that cannot read the
// log is told what to grant.
func TestDeleteLogPrivileges(t *testing.T) {
	_, db := open(t, `CREATE TABLE items (id int PRIMARY KEY, updated_at timestamptz)`,
		`DO $$ BEGIN CREATE ROLE hw_dl_plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`GRANT SELECT ON items TO hw_dl_plain`)
	pgtest.Exec(t, db, `DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO hw_dl_plain', current_database()); END $$`)
	plain, err := pgsource.Connect(t.Context(), strings.Replace(db, "postgres@", "hw_dl_plain@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(t.Context())
	_, err = plain.InstallDeleteLog(t.Context(), pgsource.InstallSpec{Table: "public.items"})
	if !errors.Is(err, pgsource.ErrDeleteLogPrivilege) || !strings.Contains(err.Error(), "may not create triggers") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line saying the role may not create triggers, got %v", err)
	}
	if holds(t, connect(t, db), "to_regnamespace('highwater') IS NOT NULL") {
		t.Fatal("a refused install created the schema")
	}
	admin, err := pgsource.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	if _, err := admin.InstallDeleteLog(t.Context(), pgsource.InstallSpec{Table: "public.items"}); err != nil {
		t.Fatal(err)
	}
	tbl, err := plain.Discover(t.Context(), pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = plain.OpenDeleteLog(t.Context(), tbl, "UTC")
	if !errors.Is(err, pgsource.ErrDeleteLogPrivilege) || !strings.Contains(err.Error(), "USAGE on schema highwater") {
		t.Fatalf("want an error naming the grant, got %v", err)
	}
}

// TestDeleteLogScanConvertsTheDeleteTime: a tombstone carries the delete
// time in the modified-at column's type and zone, and the interval's
// bounds are read in that zone too.
func TestDeleteLogScanConvertsTheDeleteTime(t *testing.T) {
	for _, tc := range []struct{ typ, tz string }{{"timestamptz", "UTC"}, {"timestamp", "America/New_York"}, {"date", "Pacific/Kiritimati"}} {
		t.Run(tc.typ, func(t *testing.T) {
			src, db := open(t, `CREATE TABLE items (id int PRIMARY KEY, updated_at `+tc.typ+`)`,
				`INSERT INTO items SELECT g, now() FROM generate_series(1, 5) g`)
			ctx := t.Context()
			if _, err := src.InstallDeleteLog(ctx, pgsource.InstallSpec{Table: "items"}); err != nil {
				t.Fatal(err)
			}
			pgtest.Exec(t, db, `DELETE FROM items WHERE id IN (2, 4)`, `INSERT INTO items VALUES (4, now())`)
			tbl, err := src.Discover(ctx, pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
			if err != nil {
				t.Fatal(err)
			}
			dl, err := src.OpenDeleteLog(ctx, tbl, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			dl.PageRows = 1
			m, err := formats.NewMapping(tbl.Columns, formats.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var want string
			if err := connect(t, db).QueryRow(ctx, `SELECT (deleted_at AT TIME ZONE $1)::`+tc.typ+`::text FROM highwater.delete_log WHERE key = '{2}'`, tc.tz).Scan(&want); err != nil {
				t.Fatal(err)
			}
			wantMod, err := watermark.Parse(tbl.ModKind, want)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			to := watermark.Format(tbl.ModKind, watermark.Infinity)
			err = dl.Scan(ctx, m.SelectExprs(tbl.Quoted()), watermark.Interval{To: to}, nil, func(tb *pgsource.Tombstone) error {
				if tb.Mod != wantMod {
					t.Errorf("tombstone modified-at %s, want %s", watermark.Format(tbl.ModKind, tb.Mod), want)
				}
				got = append(got, string(tb.Values[0]))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// The key 4 is in the table again: its newest version is the row.
			if len(got) != 1 || got[0] != "\x00\x00\x00\x02" || dl.Pages != 2 {
				t.Fatalf("tombstones %q in %d pages, want key 2 alone in 2", got, dl.Pages)
			}
		})
	}
}

// TestDeleteLogReinstallWithAnotherKey: entries recorded under one key
// cannot be read under another, so a reinstall that changes the key drops
// them and restarts the log; one that changes nothing keeps them.
func TestDeleteLogReinstallWithAnotherKey(t *testing.T) {
	src, db := open(t, `CREATE TABLE items (a int, b text, updated_at timestamptz, PRIMARY KEY (a, b))`,
		`INSERT INTO items SELECT g, 'x' || g, now() FROM generate_series(1, 5) g`)
	ctx := t.Context()
	first, err := src.InstallDeleteLog(ctx, pgsource.InstallSpec{Table: "items"})
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, db, `DELETE FROM items WHERE a <= 2`)
	same, err := src.InstallDeleteLog(ctx, pgsource.InstallSpec{Table: "items", PrimaryKey: []string{"a", "b"}})
	if err != nil || same.Entries != 2 || !same.InstalledAt.Equal(first.InstalledAt) {
		t.Fatalf("an unchanged reinstall: %+v, %v", same, err)
	}
	other, err := src.InstallDeleteLog(ctx, pgsource.InstallSpec{Table: "items", PrimaryKey: []string{"b", "a"}})
	if err != nil || other.Entries != 0 || !other.InstalledAt.After(first.InstalledAt) || !slices.Equal(other.KeyColumns, []string{"b", "a"}) {
		t.Fatalf("a reinstall with another key order: %+v, %v", other, err)
	}
}
