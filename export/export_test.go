package export_test

import (
	"testing"
)

const itemsTable = `CREATE TABLE items (
	id bigint PRIMARY KEY,
	updated_at timestamptz,
	name text,
	price numeric(12,2)
)`

func TestSmoke(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 second', 'n' || g, g / 100.0 FROM generate_series(1, 1000) g`)
	res := l.mustExport(l.options())
	if got := res.Commit.Metrics.RowsTransferred; got != 1000 {
		t.Fatalf("rows transferred %d, want 1000", got)
	}
	if got := scalar(t, l.query("SELECT count(*) FROM lake")); got != "1000" {
		t.Fatalf("lake has %s rows", got)
	}
}
