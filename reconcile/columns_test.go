package reconcile_test

import (
	"fmt"
	"testing"

	"github.com/highwater-dev/highwater/reconcile"
)

// TestColumnReaderPages reconciles a table whose columns span many pages
// and whose NULLs, empty strings and empty bytea are spread over them,
// after updates that forget modified-at turn one into another, and after
// a second export adds newer versions of some keys in another file: the
// column reader must pair each row's values across page boundaries and
// keep a NULL apart from an empty value.
func TestColumnReaderPages(t *testing.T) {
	const n = 30000
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, blob bytea, n int4)`,
		fmt.Sprintf(`INSERT INTO items SELECT i, now() - interval '1 day' + i * interval '1 ms',
			CASE WHEN i %% 7 = 0 THEN NULL WHEN i %% 11 = 0 THEN '' ELSE repeat(md5(i::text), 4) END,
			CASE WHEN i %% 5 = 0 THEN NULL WHEN i %% 13 = 0 THEN ''::bytea ELSE decode(md5(i::text), 'hex') END,
			CASE WHEN i %% 3 = 0 THEN NULL ELSE i END
			FROM generate_series(1, %d) i`, n))
	l.export()
	// Newer versions of a range of keys, in a second file.
	l.exec(`UPDATE items SET name = name || 'v2', updated_at = now() WHERE id BETWEEN 12000 AND 12999`)
	if res := l.export(); len(res.Commit.Added) == 0 {
		t.Fatal("the second export added no file")
	}
	check(t, l.reconcile(reconcile.Options{}), want{matched: n})
	l.exec(
		`UPDATE items SET name = '' WHERE id = 14`,        // NULL to empty
		`UPDATE items SET name = NULL WHERE id = 22`,      // empty to NULL
		`UPDATE items SET blob = ''::bytea WHERE id = 10`, // NULL to empty
		`UPDATE items SET blob = NULL WHERE id = 26`,      // empty to NULL
		`UPDATE items SET n = 0 WHERE id = 3`,             // NULL to zero
		`UPDATE items SET name = '' WHERE id = 15001`,     // NULL to empty, mid-table
		`UPDATE items SET name = name || 'x' WHERE id = 29999`,
		`UPDATE items SET name = name WHERE id = 20001`, // no change
		`UPDATE items SET name = 'v1' WHERE id = 12345`, // the second file's version
	)
	check(t, l.reconcile(reconcile.Options{}), want{matched: n - 8,
		changed: []string{"14", "22", "10", "26", "3", "15001", "29999", "12345"}})
}

// TestKeysOnlyListsTombstones reconciles a table with an array column and
// a date modified-at, keys only, which reads the lake column by column
// and skips the array, and in full, which reads it row by row: before and
// after a repair whose tombstones and new versions must win over the old
// versions in both readers, without a dedupe in between.
func TestKeysOnlyListsTombstones(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at date NOT NULL, tags int[], name text)`,
		`INSERT INTO items SELECT i, current_date - 10 + i % 5, CASE WHEN i % 4 = 0 THEN NULL ELSE ARRAY[i, NULL, i + 1] END, 'n' || i
			FROM generate_series(1, 100) i`)
	l.export()
	keysOnly := reconcile.Options{KeysOnly: true}
	check(t, l.reconcile(keysOnly), want{matched: 100})
	check(t, l.reconcile(reconcile.Options{}), want{matched: 100})
	l.exec(
		`UPDATE items SET tags = '{}' WHERE id = 3`, // unseen by keys only
		`UPDATE items SET updated_at = updated_at - 1 WHERE id = 4`,
		`DELETE FROM items WHERE id IN (7, 8)`,
		`INSERT INTO items VALUES (1001, current_date - 100, NULL, NULL)`)
	check(t, l.reconcile(keysOnly), want{matched: 97, missing: []string{"1001"}, extra: []string{"7", "8"}, changed: []string{"4"}})
	check(t, l.reconcile(reconcile.Options{}), want{matched: 96, missing: []string{"1001"}, extra: []string{"7", "8"}, changed: []string{"3", "4"}})
	rep := l.reconcile(reconcile.Options{Repair: true})
	// 4's source version is older than the lake's: no version can win
	// over it.
	if rep.Report.RepairedRows != 2 || rep.Report.Tombstones != 2 || rep.Report.Unrepaired != 1 {
		t.Fatalf("repair: %+v %v", rep.Report, rep.Warnings)
	}
	check(t, l.reconcile(keysOnly), want{matched: 98, changed: []string{"4"}})
	check(t, l.reconcile(reconcile.Options{}), want{matched: 98, changed: []string{"4"}})
}

// TestWideKeys reconciles keys far wider than a spill buffer (the index
// holds them compressed), with partitions so small that they split
// again: a record bigger than a chunk is written and read back whole.
func TestWideKeys(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (k text PRIMARY KEY, updated_at timestamptz NOT NULL, v text)`,
		`INSERT INTO items SELECT repeat(md5(i::text), 3000 + i), now() - interval '1 hour', 'v' || i FROM generate_series(1, 60) i`)
	l.spec.PrimaryKey = []string{"k"}
	l.export()
	var opts reconcile.Options
	opts.SetJudging(2, 64<<10)
	if res := l.reconcile(opts); res.Report.Matched != 60 || !res.Equal() {
		t.Fatalf("a fresh export: %+v", res.Report)
	}
	l.exec(`UPDATE items SET v = 'unseen' WHERE v IN ('v3', 'v30')`,
		`DELETE FROM items WHERE v = 'v7'`,
		`INSERT INTO items VALUES (repeat('z', 200000), '2001-01-01', 'backdated')`)
	r := l.reconcile(opts).Report
	if r.Matched != 57 || r.Changed != 2 || r.Extra != 1 || r.Missing != 1 {
		t.Fatalf("report: %+v", r)
	}
}
