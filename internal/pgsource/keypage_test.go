package pgsource

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestKeyPageLeadColumns checks what a key page sends for every row
// besides the columns: the modified-at a second time only when its own
// select expression is not the bare column, and nothing else. Each column
// sent costs the server about a fifth of a narrow row.
func TestKeyPageLeadColumns(t *testing.T) {
	tab := &Table{
		Spec: Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "at"},
		Columns: []formats.Column{
			{Name: "note", TypeOID: pgtype.TextOID, Typmod: -1, TypeName: "text"},
			{Name: "at", TypeOID: pgtype.TimestamptzOID, Typmod: -1, TypeName: "timestamp with time zone"},
			{Name: "id", TypeOID: pgtype.Int8OID, Typmod: -1, TypeName: "bigint"},
		},
		Relation: `"public"."items"`,
		ModKind:  watermark.Timestamptz,
		modIdx:   1,
		keyIdx:   []int{2},
	}
	for _, tc := range []struct {
		name  string
		exprs func([]string) []string
		sel   string
	}{
		{name: "columns", sel: `t."note", t."at", t."id"`},
		{name: "keys only", exprs: func(q []string) []string { q[0] = "NULL"; return q },
			sel: `NULL, t."at", t."id"`},
		{name: "key selected as an expression", exprs: func(q []string) []string { q[2] += "::text"; return q },
			sel: `t."note", t."at", t."id"::text, t."id"::text`},
		{name: "modified-at selected as an expression", exprs: func(q []string) []string { q[1] = "pg_catalog.format('%s', " + q[1] + ")"; return q },
			sel: `t."at", t."note", pg_catalog.format('%s', t."at"), t."id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exprs := tab.Quoted()
			if tc.exprs != nil {
				exprs = tc.exprs(exprs)
			}
			ks := (&Source{}).NewKeyScanner(tab, exprs)
			after := []string{"41"}
			for _, a := range [][]string{nil, after} {
				sql, _ := ks.pageSQL(Window{}, a, 500)
				if want := "SELECT " + tc.sel + "\nFROM"; !strings.HasPrefix(sql, want) {
					t.Errorf("want %s in:\n%s", want, sql)
				}
			}
		})
	}
}
