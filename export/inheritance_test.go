package export_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

// A table with inheritance children is refused: reading it reads the
// children's rows, which its unique index does not cover, so two distinct
// rows would share a key. The suggested source_query reads its own rows.
func TestInheritanceChildrenRefused(t *testing.T) {
	l := newLake(t, itemsTable,
		`CREATE TABLE items_2025 () INHERITS (items)`,
		`INSERT INTO items VALUES (1, '2026-01-01', 'parent', 1), (2, '2026-01-01', 'parent', 2)`,
		`INSERT INTO items_2025 VALUES (1, '2026-01-02', 'child', 3)`)
	_, err := l.export(l.options())
	if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "--source-query 'SELECT * FROM ONLY public.items'") ||
		!strings.Contains(err.Error(), "public.items_2025") {
		t.Fatalf("want a refusal naming the child and ONLY, got %v", err)
	}
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("committed seq %d", st.Seq)
	}
	opts := l.options()
	opts.Source.Table, opts.Source.Query = "", "SELECT * FROM ONLY public.items"
	l.mustExport(opts)
	if got := fmt.Sprint(l.query("SELECT id, name FROM lake ORDER BY id")); got != "[[1 parent] [2 parent]]" {
		t.Fatalf("lake %s", got)
	}
}

// Declarative partitioning keeps working: the partitioned table's unique
// index covers every partition, sub-partitions and the default one
// included, and every row is exported, first and incrementally.
func TestPartitionedTableExportsEveryPartition(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (region text, id bigint, updated_at timestamptz, name text, PRIMARY KEY (region, id)) PARTITION BY LIST (region)`,
		`CREATE TABLE items_eu PARTITION OF items FOR VALUES IN ('eu')`,
		`CREATE TABLE items_us PARTITION OF items FOR VALUES IN ('us') PARTITION BY HASH (id)`,
		`CREATE TABLE items_us0 PARTITION OF items_us FOR VALUES WITH (MODULUS 2, REMAINDER 0)`,
		`CREATE TABLE items_us1 PARTITION OF items_us FOR VALUES WITH (MODULUS 2, REMAINDER 1)`,
		`CREATE TABLE items_other PARTITION OF items DEFAULT`,
		`INSERT INTO items SELECT r, g, '2026-01-01'::timestamptz + g * interval '1 second', r || g
		 FROM unnest(ARRAY['eu', 'us', 'apac']) r, generate_series(1, 40) g`)
	opts := l.options()
	opts.Source.PrimaryKey = []string{"region", "id"}
	opts.PageRows = 7
	if res := l.mustExport(opts); res.Commit.Metrics.RowsTransferred != 120 {
		t.Fatalf("first run read %d rows, want 120", res.Commit.Metrics.RowsTransferred)
	}
	l.exec(`UPDATE items SET updated_at = now(), name = 'new' WHERE id IN (3, 4)`)
	if res := l.mustExport(opts); res.Commit.Metrics.RowsTransferred != 6 {
		t.Fatalf("second run read %d rows, want 6", res.Commit.Metrics.RowsTransferred)
	}
	got := l.query(`SELECT count(*), count(DISTINCT (region, id)), count(DISTINCT region), count(*) FILTER (WHERE name = 'new') FROM lake`)
	if fmt.Sprint(got) != "[[126 120 3 6]]" {
		t.Fatalf("lake %v", got)
	}
	want := l.pgQuery(`SELECT tableoid::regclass::text, count(*) FROM items GROUP BY 1 ORDER BY 1`)
	if len(want) != 4 {
		t.Fatalf("rows are in %d partitions, want 4", len(want))
	}
}
