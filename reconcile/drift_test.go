package reconcile_test

import (
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/reconcile"
)

const itemsTable = `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, price numeric(12,2));
INSERT INTO items SELECT i, now() - interval '1 hour' + i * interval '1 ms', 'n' || i, i * 1.5 FROM generate_series(1, 100) i;`

// TestDrift makes the three drifts a watermark cannot see (an update that
// forgets modified-at, a backdated insert, a hard delete) and checks that
// reconcile names exactly those keys, that a repair and a dedupe make the
// lake equal, and that a second reconcile finds nothing: on local disk
// and on S3.
func TestDrift(t *testing.T) {
	for _, store := range []struct {
		name string
		dest func(*testing.T) string
	}{{"file", func(t *testing.T) string { return "file://" + t.TempDir() }}, {"s3", func(t *testing.T) string { return cloudtest.S3(t) + "/lake" }}} {
		t.Run(store.name, func(t *testing.T) {
			l := newLake(t, itemsTable)
			l.dest = store.dest(t)
			drift(t, l)
		})
	}
}

func drift(t *testing.T, l *lake) {
	l.export()
	if res := l.reconcile(reconcile.Options{}); !res.Equal() || res.Report.Matched != 100 {
		t.Fatalf("a fresh export: %+v", res.Report)
	}
	l.exec(
		// Seen by the next export: not a difference.
		`UPDATE items SET name = 'seen', updated_at = now() WHERE id = 10`,
		// An update that forgets modified-at.
		`UPDATE items SET name = 'unseen' WHERE id IN (3, 5)`,
		`UPDATE items SET price = price + 0.01 WHERE id = 50`,
	)
	l.export()
	l.exec(
		// Backdated inserts, below the watermark.
		`INSERT INTO items VALUES (1001, '2001-01-01', 'old', 1), (1002, '2001-01-02', NULL, NULL)`,
		// Hard deletes.
		`DELETE FROM items WHERE id IN (7, 8, 9)`,
	)
	res := l.reconcile(reconcile.Options{})
	check(t, res, want{matched: 94, missing: []string{"1001", "1002"}, extra: []string{"7", "8", "9"}, changed: []string{"3", "5", "50"}})
	if res.Commit == nil || res.Commit.Kind != manifest.KindReconcile || res.Commit.Reconcile.Changed != 3 || len(res.Commit.Added) != 0 {
		t.Fatalf("commit: %+v", res.Commit)
	}
	if wm := l.state().Watermark; *wm != *res.Commit.Watermark {
		t.Fatalf("the reconcile moved the watermark")
	}
	// --keys-only sees what moves keys or modified-at, not the values.
	check(t, l.reconcile(reconcile.Options{KeysOnly: true}), want{matched: 97, missing: []string{"1001", "1002"}, extra: []string{"7", "8", "9"}})

	before := l.state().Watermark
	rep := l.reconcile(reconcile.Options{Repair: true})
	if !rep.Report.Repaired || rep.Report.RepairedRows != 5 || rep.Report.Tombstones != 3 || len(rep.Commit.Added) != 1 {
		t.Fatalf("repair: %+v, commit %+v", rep.Report, rep.Commit)
	}
	if got := l.state().Watermark; *got != *before {
		t.Fatalf("the repair moved the watermark from %s to %s", *before, *got)
	}
	// The repair's versions win even before a dedupe.
	check(t, l.reconcile(reconcile.Options{}), want{matched: 99})
	l.dedupe()
	res = l.reconcile(reconcile.Options{})
	check(t, res, want{matched: 99})
	if !res.Equal() {
		t.Fatal("not equal after repair and dedupe")
	}
}
