package pgsource_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
)

// TestKeyScanModifiedAt: a key scan and a keyed read give each row's
// modified-at and values, whether the page reads the modified-at from its
// data column or, when that column is selected as an expression, from a
// bare copy of it; NULL included, across pages.
func TestKeyScanModifiedAt(t *testing.T) {
	src, _ := open(t,
		`CREATE TABLE items (id bigint PRIMARY KEY, m timestamptz, note text)`,
		`INSERT INTO items SELECT g, CASE WHEN g % 3 = 0 THEN NULL ELSE '2024-01-01'::timestamptz + g * interval '1 s' END, 'n' || g
		 FROM generate_series(-4, 6) g`)
	tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "m"})
	if err != nil {
		t.Fatal(err)
	}
	mod, key, note := tab.ModColumn(), tab.KeyColumns()[0], slices.IndexFunc(tab.Columns, func(c formats.Column) bool { return c.Name == "note" })
	for _, tc := range []struct {
		name  string
		exprs func([]string) []string
	}{
		{name: "columns"},
		{name: "modified-at as text", exprs: func(q []string) []string { q[mod] = q[mod] + "::text"; return q }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exprs := tab.Quoted()
			if tc.exprs != nil {
				exprs = tc.exprs(exprs)
			}
			ks := src.NewKeyScanner(tab, exprs)
			ks.PageRows = 4
			var got []string
			row := func(r *pgsource.Row) error {
				m := "NULL"
				if !r.ModNull {
					m = watermark.Format(watermark.Timestamptz, r.Mod)
				}
				got = append(got, fmt.Sprintf("%d %s %s", int64(beUint64(r.Values[key])), m, r.Values[note]))
				return nil
			}
			if err := ks.Scan(t.Context(), pgsource.Window{}, row); err != nil {
				t.Fatal(err)
			}
			var want []string
			for g := int64(-4); g <= 6; g++ {
				m := "NULL"
				if g%3 != 0 {
					m = watermark.Format(watermark.Timestamptz, watermark.Value(1704067200_000000+g*1_000_000))
				}
				want = append(want, fmt.Sprintf("%d %s n%d", g, m, g))
			}
			if !slices.Equal(got, want) {
				t.Errorf("scan:\n%q\nwant\n%q", got, want)
			}
			got = nil
			if err := ks.Read(t.Context(), [][]string{{"-4"}, {"5"}, {"99"}}, row); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if w := []string{want[0], want[9]}; !slices.Equal(got, w) {
				t.Errorf("read:\n%q\nwant\n%q", got, w)
			}
		})
	}
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
