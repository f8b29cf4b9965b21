package export_test

import (
	"strings"
	"testing"
)

// TestWideRowsWarn: a row larger than the row-group size cannot be split,
// so the export says that memory will exceed its row-group bound, and
// still exports every row exactly.
func TestWideRowsWarn(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, now(), repeat(chr(64 + g), 3000000), g FROM generate_series(1, 4) g`,
		`INSERT INTO items SELECT g, now(), 'small', g FROM generate_series(5, 2000) g`)
	opts := l.options()
	opts.RowGroupBytes = 1 << 20
	res := l.mustExport(opts)
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w, "larger than the row-group size") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d warnings about wide rows, want one: %q", n, res.Warnings)
	}
	got := l.query(`SELECT count(*), sum(length(name)) FROM lake`)
	if got[0][0] != "2000" || got[0][1] != "12009980" {
		t.Fatalf("lake holds %v rows and characters, want 2000 and 12009980", got[0])
	}

	// Rows under the bound: no warning.
	l2 := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'small', g FROM generate_series(1, 100) g`)
	for _, w := range l2.mustExport(l2.options()).Warnings {
		if strings.Contains(w, "row-group size") {
			t.Fatalf("a wide-row warning without a wide row: %q", w)
		}
	}
}
