package iceberg_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/internal/icebergtest"
)

const itemsDDL = `CREATE TABLE items (
	id int PRIMARY KEY,
	name text,
	price numeric(10,2),
	tags text[],
	uid uuid,
	at timestamp,
	t time,
	d date,
	big bigint,
	ok boolean,
	f float8,
	raw bytea,
	wide numeric(30,5),
	doc jsonb,
	nums int[],
	updated_at timestamptz NOT NULL DEFAULT now())`

var itemCols = []string{"id", "name", "price", "tags", "uid", "at", "t", "d", "big", "ok", "f", "raw", "wide", "doc", "nums", "updated_at"}

// TestReadBack follows a model through exports, updates, a dedupe, an
// added column and a full refresh, and after each reads the table back with
// iceberg-go's own reader, given only its location, against PostgreSQL.
func TestReadBack(t *testing.T) {
	l := newLake(t, "", itemsDDL,
		`INSERT INTO items (id, name, price, tags, uid, at, t, d, big, ok, f, raw, wide, doc, nums) VALUES
			(1, 'one', 1.50, '{a,b}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-01-02 03:04:05.123456', '12:34:56.5', '1999-12-31', 9007199254740993, true, 1.5, '\x00ff', 1234567890123456789012345.12345, '{"a": [1, 2]}', '{1,NULL,3}'),
			(2, 'two', NULL, '{}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
			(3, NULL, 12345678.99, '{x,NULL}', NULL, '1970-01-01', '00:00', '2024-02-29', -1, false, -0.25, '', 0.00001, 'null', '{}')`)
	checkSeqs := func(want int) {
		t.Helper()
		var seqs []string
		for i := 1; i <= want; i++ {
			seqs = append(seqs, strconv.Itoa(i))
		}
		if got := snapshotSeqs(t, l.table()); !slices.Equal(got, seqs) {
			t.Fatalf("snapshots carry seqs %v, want %v", got, seqs)
		}
	}
	l.export(false)
	l.sync()
	l.compare(itemCols...)
	checkSeqs(1)
	// The files carry the bounds of the modified-at column that the log
	// recorded: a range before them plans no file, a range around them
	// every file.
	for _, c := range []struct {
		filter iceberg.BooleanExpression
		files  int
	}{
		{iceberg.LessThan(iceberg.Reference("updated_at"), iceberg.Timestamp(86_400_000_000)), 0},
		{iceberg.GreaterThanEqual(iceberg.Reference("updated_at"), iceberg.Timestamp(86_400_000_000)), 1},
	} {
		tasks, err := l.table().Scan(table.WithRowFilter(c.filter)).PlanFiles(t.Context())
		if err != nil || len(tasks) != c.files {
			t.Fatalf("scan %s plans %d files (%v), want %d", c.filter, len(tasks), err, c.files)
		}
	}
	for col, want := range map[string]string{"at": "timestamp", "updated_at": "timestamptz", "_hw_version": "timestamptz",
		"uid": "string", "t": "string", "price": "decimal(10, 2)", "wide": "decimal(30, 5)", "nums": "list<int>",
		"tags": "list<string>", "doc": "string", "raw": "binary", "big": "long", "id": "int", "d": "date"} {
		f, ok := l.table().Schema().FindFieldByName(col)
		if !ok || f.Type.String() != want {
			t.Errorf("column %s is %v in the Iceberg schema, want %s", col, f.Type, want)
		}
	}

	l.exec(`UPDATE items SET name = 'two again', updated_at = now() WHERE id = 2`,
		`INSERT INTO items (id, name) VALUES (4, 'four')`)
	l.export(false)
	if res := l.sync(); res.From != 1 || res.To != 2 || res.Published != 1 {
		t.Fatalf("sync: %+v, want from 1 to 2 in one version", res)
	}
	l.compare(itemCols...)
	checkSeqs(2)

	l.dedupe()
	l.sync()
	tbl := l.table()
	if op := tbl.CurrentSnapshot().Summary.Operation; op != table.OpOverwrite {
		t.Fatalf("a dedupe is a %s snapshot, want overwrite", op)
	}
	if n := len(icebergtest.Rows(t, tbl, 0)); n != 4 {
		t.Fatalf("after the dedupe the table holds %d rows, want one per key (4)", n)
	}
	l.compare(itemCols...)

	l.exec(`ALTER TABLE items ADD COLUMN note text`,
		`UPDATE items SET note = 'noted', updated_at = now() WHERE id = 1`)
	l.export(false)
	l.sync()
	l.compare(append(itemCols, "note")...)
	tbl = l.table()
	if _, ok := tbl.Schema().FindFieldByName("note"); !ok {
		t.Fatalf("the added column is not in the Iceberg schema: %v", tbl.Schema())
	}
	if len(tbl.Metadata().Schemas()) != 2 {
		t.Fatalf("want two schemas (the added column is a schema update), got %d", len(tbl.Metadata().Schemas()))
	}

	l.exec(`DELETE FROM items WHERE id = 3`)
	l.export(true)
	l.sync()
	l.compare(append(itemCols, "note")...)
	checkSeqs(5)
	if n := len(icebergtest.Rows(t, l.table(), 0)); n != 3 {
		t.Fatalf("after the full refresh the table holds %d rows, want 3", n)
	}

	// A change of type is refused by an incremental export, and a full
	// refresh retypes the column: a new field id, read by name.
	l.exec(`ALTER TABLE items ALTER COLUMN big TYPE text`, `UPDATE items SET big = 'b' || id, updated_at = now()`)
	l.export(true)
	l.sync()
	l.compare(append(itemCols, "note")...)
	if f, _ := l.table().Schema().FindFieldByName("big"); f.Type.String() != "string" {
		t.Fatalf("after the retyping full refresh big is %v", f.Type)
	}
	checkSeqs(6)

	// A sync with nothing to do publishes nothing.
	if res := l.sync(); res.Published != 0 || res.To != 6 {
		t.Fatalf("a sync at the head: %+v", res)
	}
}
