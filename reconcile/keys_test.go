package reconcile_test

import (
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/reconcile"
)

// TestCompositeAwkwardKeys reconciles and repairs a model whose key is
// four columns of awkward types and values: text that differs only in
// case, spaces, quotes, commas and non-ASCII, a timestamptz, a negative
// numeric and a uuid.
func TestCompositeAwkwardKeys(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (t text, ts timestamptz, n numeric(10,2), u uuid, updated_at timestamptz NOT NULL, v text,
		PRIMARY KEY (t, ts, n, u))`,
		`INSERT INTO items SELECT x.t, '2026-01-01 00:00:00.5+00'::timestamptz + g * interval '1 day', (g - 3) * 1.25, 
			('00000000-0000-0000-0000-00000000000' || g)::uuid, now() - interval '1 hour', 'v' || g
		 FROM unnest(ARRAY['a', 'A', ' a', 'a ', '', 'it''s', 'x,y', '"q"', 'ü', '日本']) AS x(t), generate_series(1, 3) g`)
	l.spec.PrimaryKey = []string{"t", "ts", "n", "u"}
	l.export()
	check(t, l.reconcile(reconcile.Options{}), want{matched: 30})
	l.exec(`UPDATE items SET v = 'unseen' WHERE t IN ('A', 'a ') AND n = -2.50`,
		`DELETE FROM items WHERE t = 'it''s' AND n = -1.25`,
		`INSERT INTO items VALUES ('日本', '2001-01-01 00:00:00+00', -0.01, 'ffffffff-ffff-ffff-ffff-ffffffffffff', '2001-01-01', 'backdated')`)
	check(t, l.reconcile(reconcile.Options{}), want{matched: 27,
		missing: []string{"日本|2001-01-01 00:00:00.000000+00|-0.01|ffffffff-ffff-ffff-ffff-ffffffffffff"},
		extra:   []string{"it's|2026-01-03 00:00:00.500000+00|-1.25|00000000-0000-0000-0000-000000000002"},
		changed: []string{"A|2026-01-02 00:00:00.500000+00|-2.50|00000000-0000-0000-0000-000000000001", "a |2026-01-02 00:00:00.500000+00|-2.50|00000000-0000-0000-0000-000000000001"}})
	rep := l.reconcile(reconcile.Options{Repair: true})
	if rep.Report.RepairedRows != 3 || rep.Report.Tombstones != 1 {
		t.Fatalf("repair: %+v", rep.Report)
	}
	l.dedupe()
	check(t, l.reconcile(reconcile.Options{}), want{matched: 30})
}

// TestTenantModel reconciles one tenant's instance: the other tenants'
// rows are neither missing nor extra.
func TestTenantModel(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (tenant text, id int, updated_at timestamptz NOT NULL, v text, PRIMARY KEY (tenant, id))`,
		`INSERT INTO items SELECT x, g, now() - interval '1 hour', 'v' FROM unnest(ARRAY['acme', 'globex']) x, generate_series(1, 20) g`)
	acme := "acme"
	l.spec = pgsource.Spec{Table: "public.items", PrimaryKey: []string{"tenant", "id"}, ModifiedAt: "updated_at", TenantColumn: "tenant", Tenant: &acme}
	l.dest += "/{tenant}"
	l.export()
	check(t, l.reconcile(reconcile.Options{}), want{matched: 20})
	l.exec(`DELETE FROM items WHERE id = 3`, `UPDATE items SET v = 'x' WHERE id = 4`)
	check(t, l.reconcile(reconcile.Options{}), want{matched: 18, extra: []string{"acme|3"}, changed: []string{"acme|4"}})
	l.reconcile(reconcile.Options{Repair: true})
	l.dedupe()
	check(t, l.reconcile(reconcile.Options{}), want{matched: 19})
}

// TestWindow judges only the rows whose modified-at lies in the window, on
// either side, and reads back by key the lake's keys that left it in the
// source: such a key is changed, not extra, and is never tombstoned.
func TestWindow(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id int PRIMARY KEY, updated_at timestamptz NOT NULL, v text)`,
		`INSERT INTO items SELECT g, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 hour', 'v' FROM generate_series(1, 48) g`)
	l.export()
	l.exec(
		`UPDATE items SET v = 'x' WHERE id IN (5, 30)`,                         // 5 outside, 30 inside
		`DELETE FROM items WHERE id IN (6, 31)`,                                // 6 outside, 31 inside
		`UPDATE items SET updated_at = '2025-01-01' WHERE id = 32`,             // moved out of the window in the source
		`UPDATE items SET updated_at = '2026-01-02 04:30:00+00' WHERE id = 20`, // moved into it
		`INSERT INTO items VALUES (100, '2026-01-02 05:00:00+00', 'backdated'), (101, '2025-06-01', 'outside')`)
	win := reconcile.Options{WindowStart: "2026-01-02 00:00:00+00", WindowEnd: "2026-01-02 12:00:00+00"}
	// In the window: ids 24 to 35 in the lake (hours 24-35), 20 and 100
	// in the source.
	res := l.reconcile(win)
	check(t, res, want{matched: 9, missing: []string{"100"}, extra: []string{"31"}, changed: []string{"20", "30", "32"}})
	if *res.Report.WindowStart != "2026-01-02 00:00:00.000000+00" || *res.Report.WindowEnd != "2026-01-02 12:00:00.000000+00" {
		t.Fatalf("window recorded as %v, %v", *res.Report.WindowStart, *res.Report.WindowEnd)
	}
	rep := l.reconcile(reconcile.Options{WindowStart: win.WindowStart, WindowEnd: win.WindowEnd, Repair: true})
	// 32's source version is older than the lake's: no version can win
	// over the lake's, so it is left for a full refresh, and said so.
	if rep.Report.RepairedRows != 3 || rep.Report.Tombstones != 1 || rep.Report.Unrepaired != 1 || len(rep.Warnings) == 0 {
		t.Fatalf("repair: %+v %v", rep.Report, rep.Warnings)
	}
	l.dedupe()
	check(t, l.reconcile(win), want{matched: 12, changed: []string{"32"}})
}

// TestRepairNeverRemovesLiveRows: a key whose literal made from the lake's
// value finds no row (a date key at infinity, which the files hold as
// 9999-12-31) is left for the next reconcile, never tombstoned.
func TestRepairNeverRemovesLiveRows(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (d date PRIMARY KEY, updated_at timestamptz NOT NULL, v text)`,
		`INSERT INTO items VALUES ('infinity', now() - interval '1 hour', 'a'), ('2026-01-01', now() - interval '1 hour', 'b')`)
	l.spec.PrimaryKey = []string{"d"}
	l.export()
	l.exec(`UPDATE items SET v = 'unseen'`)
	rep := l.reconcile(reconcile.Options{Repair: true})
	if rep.Report.Changed != 2 || rep.Report.RepairedRows != 1 || rep.Report.Tombstones != 0 || rep.Report.Unrepaired != 1 {
		t.Fatalf("repair: %+v", rep.Report)
	}
	l.dedupe()
	check(t, l.reconcile(reconcile.Options{}), want{matched: 1, changed: []string{"9999-12-31"}})
}
