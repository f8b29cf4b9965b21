package pgsource_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
)

var everything = watermark.Interval{To: "infinity", IncludeNull: true}

// TestPagesSendEachValueOnce reads, after each page, the statement the
// scan's session last ran: every page selects the modified-at column
// once, as a column, and a page that starts at the row the previous one
// ended on sends no flag for the rows at its cursor, since on a bigint key
// and a timestamptz the scan tells them by their bytes. Both were sent for
// every row, a fifth of the server's work beyond COPY's.
func TestPagesSendEachValueOnce(t *testing.T) {
	src, db := open(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, note text)`,
		`CREATE INDEX ON items (updated_at, id)`,
		`INSERT INTO items SELECT g, '2024-01-01'::timestamptz + (g / 3) * interval '1 s', 'n' FROM generate_series(1, 20) g`)
	tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, db)
	var pid int
	if err := src.Conn().QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	sc := src.NewScanner(tab, tab.Quoted())
	sc.PageRows = 3
	var selects []string
	sc.AfterPage = func() {
		var q string
		if err := conn.QueryRow(t.Context(), "SELECT query FROM pg_stat_activity WHERE pid = $1", pid).Scan(&q); err != nil {
			t.Fatal(err)
		}
		if _, rest, ok := strings.Cut(q, "SELECT "); ok {
			sel, _, _ := strings.Cut(rest, "\nFROM ")
			selects = append(selects, sel)
		}
	}
	n := 0
	if err := sc.Scan(t.Context(), watermark.Interval{To: "infinity"}, nil, func(*pgsource.Row) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 20 || len(selects) < 7 {
		t.Fatalf("%d rows in %d pages, want 20 in 7 or more", n, len(selects))
	}
	for i, sel := range selects {
		if c := strings.Count(sel, `t."updated_at"`); c != 1 {
			t.Errorf("page %d selects the modified-at %d times: %s", i+1, c, sel)
		}
		if sel != `t."id", t."updated_at", t."note"` {
			t.Errorf("page %d selects %s, want the columns only", i+1, sel)
		}
	}
}

// TestPageBoundariesOnExactTypes: on a key whose rows at the cursor the
// client tells by their bytes, the guarantees of keyset paging hold at
// every page size and wherever the pages end: ties in modified-at are
// read once each, in (modified_at, id) order; a duplicate is refused
// wherever it lies; and when the row a page ended on is updated or deleted
// before the next page, the next page's first row is not taken for it.
func TestPageBoundariesOnExactTypes(t *testing.T) {
	const rows = 13
	src, db := open(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, note text)`,
		`CREATE INDEX ON items (updated_at, id)`,
		// Ties: three rows share each stamp, and one row has none.
		fmt.Sprintf(`INSERT INTO items SELECT g, CASE WHEN g = 5 THEN NULL ELSE '2024-01-01'::timestamptz + (g / 3) * interval '1 s' END, 'n' FROM generate_series(1, %d) g`, rows))
	conn := connect(t, db)
	scan := func(t *testing.T, spec pgsource.Spec, pageRows int, afterPage func(*pgsource.Scanner)) ([]int64, error) {
		t.Helper()
		tab, err := src.Discover(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		sc := src.NewScanner(tab, tab.Quoted())
		sc.PageRows = pageRows
		if afterPage != nil {
			sc.AfterPage = func() { afterPage(sc) }
		}
		var ids []int64
		err = sc.Scan(t.Context(), everything, nil, func(r *pgsource.Row) error {
			var id int64
			for _, b := range r.Values[0] {
				id = id<<8 | int64(b)
			}
			ids = append(ids, id)
			return nil
		})
		return ids, err
	}
	var want []int64
	if err := conn.QueryRow(t.Context(), "SELECT array_agg(id ORDER BY updated_at NULLS FIRST, id) FROM items").Scan(&want); err != nil {
		t.Fatal(err)
	}
	table := pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
	for pageRows := 2; pageRows <= rows+1; pageRows++ { // a page of one row would only hold its cursor
		ids, err := scan(t, table, pageRows, nil)
		if err != nil || fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("page rows %d: read %v, %v; want %v", pageRows, ids, err, want)
		}
		for dup := int64(1); dup <= rows; dup++ {
			spec := pgsource.Spec{Query: fmt.Sprintf("SELECT * FROM items UNION ALL SELECT * FROM items WHERE id = %d", dup),
				PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
			if _, err := scan(t, spec, pageRows, nil); !errors.Is(err, pgsource.ErrDuplicateKey) {
				t.Fatalf("page rows %d, id %d twice: got %v, want %v", pageRows, dup, err, pgsource.ErrDuplicateKey)
			}
		}
	}

	// The row each page ends on leaves its place before the next page:
	// deleted, or stamped later (then read again there, as keyset paging
	// reads a row updated during a scan). Every other row is read once.
	for _, change := range []string{"DELETE FROM items WHERE id = $1", "UPDATE items SET updated_at = '2030-01-01' WHERE id = $1"} {
		for pageRows := 2; pageRows <= 4; pageRows++ {
			t.Run(fmt.Sprintf("%s/%d", strings.Fields(change)[0], pageRows), func(t *testing.T) {
				pgExec(t, conn, "TRUNCATE items")
				pgExec(t, conn, fmt.Sprintf(`INSERT INTO items SELECT g, '2024-01-01'::timestamptz + (g / 3) * interval '1 s', 'n' FROM generate_series(1, %d) g`, rows))
				moved := map[int64]bool{}
				ids, err := scan(t, table, pageRows, func(sc *pgsource.Scanner) {
					c, err := sc.LastCursor()
					if err != nil {
						t.Fatal(err)
					}
					if c == nil {
						return // the empty NULL phase
					}
					var id int64
					fmt.Sscan(c.Key[0], &id)
					if !moved[id] && len(moved) < 3 {
						moved[id] = true
						pgExec(t, conn, change, id)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				seen := map[int64]int{}
				for _, id := range ids {
					seen[id]++
				}
				for id := int64(1); id <= rows; id++ {
					want := 1
					if moved[id] && strings.HasPrefix(change, "UPDATE") {
						want = 2
					}
					if seen[id] != want {
						t.Errorf("id %d read %d times, want %d (moved %v): %v", id, seen[id], want, moved, ids)
					}
				}
			})
		}
	}
}

func pgExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
