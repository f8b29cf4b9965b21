package pgsource_test

import (
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
)

// TestPagesBoundedByBytes reads rows of 1,000 bytes, then of 10, in pages
// bounded by their wire size: each row comes once and in order, the first
// page holds FirstPageRows, the pages of wide rows hold fewer rows than
// PageRows allows, and a bound below one row's size still moves on: a
// page starts at its cursor's row, so it takes two.
func TestPagesBoundedByBytes(t *testing.T) {
	src, tab := pagedItems(t)
	for _, tc := range []struct {
		name      string
		pageBytes int64
		// wantMax is the most rows a page after the first may hold
		// among the wide rows.
		wantMax int
		// grow: the pages of narrow rows hold more.
		grow bool
	}{
		{"a few wide rows a page", 5_000, 5, true},
		{"below one row", 100, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := src.NewScanner(tab, tab.Quoted())
			sc.PageRows, sc.FirstPageRows, sc.PageBytes = 100, 4, tc.pageBytes
			var pages []int // rows of each page
			n := 0
			sc.AfterPage = func() { pages = append(pages, n); n = 0 }
			var ids []int64
			err := sc.Scan(t.Context(), watermark.Interval{To: "infinity"}, nil, func(r *pgsource.Row) error {
				n++
				var id int64
				for _, b := range r.Values[0] {
					id = id<<8 | int64(b)
				}
				ids = append(ids, id)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			inOrderOnce(t, ids)
			if len(pages) < 2 || pages[0] != 4 {
				t.Fatalf("pages of %v rows, want a first page of 4 and more", pages)
			}
			wide := 4
			for i, p := range pages[1:] {
				if p > 100 {
					t.Errorf("page %d holds %d rows, more than PageRows", i+2, p)
				}
				if wide < 30 && (p > tc.wantMax || p == 0) {
					t.Errorf("page %d of wide rows holds %d rows, want 1 to %d (pages %v)", i+2, p, tc.wantMax, pages)
				}
				wide += p
			}
			if tc.grow && pages[len(pages)-2] <= tc.wantMax {
				t.Errorf("the pages of narrow rows did not grow: %v", pages)
			}
			t.Logf("rows of each page: %v", pages)
		})
	}
}

// TestKeyPagesBoundedByBytes: a key scan's pages follow the same bounds,
// with at least one row a page, since a key page starts after its cursor.
func TestKeyPagesBoundedByBytes(t *testing.T) {
	src, tab := pagedItems(t)
	for _, tc := range []struct {
		name      string
		pageBytes int64
		wantMax   int // the most rows of a page after the first, among the wide rows
	}{
		{"a few wide rows a page", 5_000, 5},
		{"below one row", 100, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := src.NewKeyScanner(tab, tab.Quoted())
			ks.PageRows, ks.FirstPageRows, ks.PageBytes = 100, 4, tc.pageBytes
			pages := map[int64]int{} // rows of each page, by its number
			var ids []int64
			err := ks.Scan(t.Context(), pgsource.Window{}, func(r *pgsource.Row) error {
				pages[ks.Pages]++
				ids = append(ids, int64(beUint64(r.Values[0])))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			inOrderOnce(t, ids)
			if pages[1] != 4 {
				t.Fatalf("the first page holds %d rows, want 4 (pages %v)", pages[1], pages)
			}
			wide := 4
			for p := int64(2); wide < 30; p++ {
				if pages[p] > tc.wantMax || pages[p] == 0 {
					t.Fatalf("page %d of wide rows holds %d rows, want 1 to %d (pages %v)", p, pages[p], tc.wantMax, pages)
				}
				wide += pages[p]
			}
			if last := pages[ks.Pages-1]; tc.pageBytes > 1000 && last <= tc.wantMax {
				t.Errorf("the pages of narrow rows did not grow: %v", pages)
			}
		})
	}
}

// pagedItems is a table of 60 rows: ids 1 to 30 of about 1,000 bytes,
// then 31 to 60 of about 10, in the order of both their key and their
// modified-at.
func pagedItems(t *testing.T) (*pgsource.Source, *pgsource.Table) {
	t.Helper()
	src, _ := open(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, note text)`,
		`CREATE INDEX ON items (updated_at, id)`,
		`INSERT INTO items SELECT g, '2024-01-01'::timestamptz + (g / 2) * interval '1 s',
			CASE WHEN g <= 30 THEN repeat('w', 1000) ELSE repeat('n', 10) END FROM generate_series(1, 60) g`)
	tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	return src, tab
}

// inOrderOnce checks that the ids of pagedItems came each once, in order.
func inOrderOnce(t *testing.T, ids []int64) {
	t.Helper()
	if len(ids) != 60 {
		t.Fatalf("%d rows read, want 60", len(ids))
	}
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("row %d is id %d, want %d", i, id, i+1)
		}
	}
}
