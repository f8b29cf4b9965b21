package pgsource

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5/pgtype"
)

// pageTable is a model whose identifiers all need quoting, keyed on two
// columns, with a tenant, as Discover would return it.
func pageTable(query string) *Table {
	tenant := "acme'); DROP TABLE items; --"
	t := &Table{
		Spec: Spec{
			Query:        query,
			PrimaryKey:   []string{"Tenant Id", `odd"key`},
			ModifiedAt:   "Updated At",
			TenantColumn: "org",
			Tenant:       &tenant,
		},
		Columns: []formats.Column{
			{Name: "Updated At", TypeOID: pgtype.TimestamptzOID, Typmod: -1, TypeName: "timestamp with time zone"},
			{Name: "Tenant Id", TypeOID: pgtype.Int8OID, Typmod: -1, TypeName: "bigint"},
			{Name: `odd"key`, TypeOID: pgtype.TextOID, Typmod: -1, TypeName: "text"},
			{Name: "org", TypeOID: pgtype.TextOID, Typmod: -1, TypeName: "text"},
			{Name: "select", TypeOID: pgtype.JSONBOID, Typmod: -1, TypeName: "jsonb"},
		},
		ModKind:   watermark.Timestamptz,
		modIdx:    0,
		keyIdx:    []int{1, 2},
		tenantIdx: 3,
	}
	if query == "" {
		t.Table = `"My Schema"."It""ems"`
		t.Relation = `"My Schema"."It""ems"`
	}
	return t
}

var (
	placeholder = regexp.MustCompile(`\$(\d+)`)
	anyCast     = regexp.MustCompile(`CAST\(\$\d+::text AS [^)]*\)`)
)

// TestPageSQL checks the shape of every kind of page: each value reaches
// the server as a bind parameter (never as SQL text), each identifier is
// quoted, and a cursor on a composite key is one row comparison over
// (modified_at, key...), in the order of ORDER BY.
func TestPageSQL(t *testing.T) {
	from := "2024-01-01 00:00:00.000001+00 'from"
	to := "2024-02-01 00:00:00+00 'to"
	mod := "2024-01-15 12:00:00+00 'cursor"
	after := &watermark.Cursor{ModifiedAt: &mod, Key: []string{"41 'k1", `x"); DELETE FROM t; --`}}
	afterNull := &watermark.Cursor{Key: []string{"7 'n1", "O'Brien"}}
	const (
		modRef  = `t."Updated At"`
		keyRefs = `t."Tenant Id", t."odd""key"`
	)
	castRe := func(typ string) string { return `CAST\(\$(\d+)::text AS ` + regexp.QuoteMeta(typ) + `\)` }
	tenantPred := regexp.MustCompile(regexp.QuoteMeta(`t."org" = `) + castRe("text"))

	for _, tc := range []struct {
		name      string
		query     string
		rng       watermark.Interval
		after     *watermark.Cursor
		nullPhase bool
		// where are the predicates, each with the value its parameters
		// must carry, in order.
		where []pred
		order string
	}{
		{
			name: "first page of an incremental run",
			rng:  watermark.Interval{From: &from, To: to},
			where: []pred{
				{regexp.QuoteMeta(modRef+" >= ") + castRe("timestamp with time zone"), []string{from}},
				{regexp.QuoteMeta(modRef+" < ") + castRe("timestamp with time zone"), []string{to}},
			},
			order: modRef + ", " + keyRefs,
		},
		{
			name: "first page of a full run",
			rng:  watermark.Interval{To: to},
			where: []pred{
				{regexp.QuoteMeta(modRef+" < ") + castRe("timestamp with time zone"), []string{to}},
			},
			order: modRef + ", " + keyRefs,
		},
		{
			name:  "page after a cursor",
			rng:   watermark.Interval{From: &from, To: to},
			after: after,
			where: []pred{
				{regexp.QuoteMeta("("+modRef+", "+keyRefs+") >= (") + castRe("timestamp with time zone") + ", " +
					castRe("bigint") + ", " + castRe("text") + `\)`, []string{mod, after.Key[0], after.Key[1]}},
				{regexp.QuoteMeta(modRef+" < ") + castRe("timestamp with time zone"), []string{to}},
			},
			order: modRef + ", " + keyRefs,
		},
		{
			name:      "first page of the NULL phase",
			rng:       watermark.Interval{From: &from, To: to, IncludeNull: true},
			nullPhase: true,
			where:     []pred{{regexp.QuoteMeta(modRef + " IS NULL"), nil}},
			order:     keyRefs,
		},
		{
			name:      "NULL phase after a cursor",
			rng:       watermark.Interval{To: to, IncludeNull: true},
			after:     afterNull,
			nullPhase: true,
			where: []pred{
				{regexp.QuoteMeta(modRef + " IS NULL"), nil},
				{regexp.QuoteMeta("("+keyRefs+") >= (") + castRe("bigint") + ", " + castRe("text") + `\)`, afterNull.Key},
			},
			order: keyRefs,
		},
		{
			name:  "source query after a cursor",
			query: "SELECT * FROM items WHERE note <> 'x';",
			rng:   watermark.Interval{To: to},
			after: after,
			where: []pred{
				{regexp.QuoteMeta("("+modRef+", "+keyRefs+") >= (") + castRe("timestamp with time zone") + ", " +
					castRe("bigint") + ", " + castRe("text") + `\)`, []string{mod, after.Key[0], after.Key[1]}},
				{regexp.QuoteMeta(modRef+" < ") + castRe("timestamp with time zone"), []string{to}},
			},
			order: modRef + ", " + keyRefs,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := pageTable(tc.query)
			sc := (&Source{}).NewScanner(tab, tab.Quoted())
			sql, args, lay := sc.pageSQL(tc.rng, tc.after, tc.nullPhase, 500, false)

			// Every value is a parameter: none is in the text, each
			// placeholder $1..$n is used exactly once, and the arguments are
			// the values the predicates name plus the tenant.
			values := []string{*tab.Tenant, from, to, mod}
			values = append(values, after.Key...)
			values = append(values, afterNull.Key...)
			for _, v := range values {
				if strings.Contains(sql, v) {
					t.Errorf("the value %q is in the SQL text:\n%s", v, sql)
				}
			}
			used := map[int]int{}
			for _, m := range placeholder.FindAllStringSubmatch(sql, -1) {
				n, _ := strconv.Atoi(m[1])
				used[n]++
			}
			if len(used) != len(args) {
				t.Errorf("%d placeholders for %d arguments:\n%s", len(used), len(args), sql)
			}
			// A page after a cursor names the cursor's parameters twice:
			// in its WHERE, and in the flag that marks the rows at the
			// cursor (checked below).
			reuse := 1
			if tc.after != nil {
				reuse = 2
			}
			for n := 1; n <= len(args); n++ {
				if used[n] < 1 || used[n] > reuse {
					t.Errorf("$%d is used %d times:\n%s", n, used[n], sql)
				}
			}

			// The predicates, each with its values bound in order.
			where := strings.SplitN(sql, "\nWHERE ", 2)
			if len(where) != 2 {
				t.Fatalf("no WHERE clause:\n%s", sql)
			}
			conds := strings.Split(strings.SplitN(where[1], "\nORDER BY ", 2)[0], "\n  AND ")
			want := append(tc.where, pred{tenantPred.String(), []string{*tab.Tenant}})
			if len(conds) != len(want) {
				t.Fatalf("predicates %q, want %d", conds, len(want))
			}
			for i, p := range want {
				m := regexp.MustCompile("^" + p.re + "$").FindStringSubmatch(conds[i])
				if m == nil {
					t.Errorf("predicate %d is %s, want the form %s", i, conds[i], p.re)
					continue
				}
				for j, v := range p.values {
					n, _ := strconv.Atoi(m[j+1])
					if got := args[n-1]; got != v {
						t.Errorf("predicate %d binds $%d = %v, want %q", i, n, got, v)
					}
				}
			}

			if !strings.Contains(sql, "\nORDER BY "+tc.order+"\nLIMIT 500") {
				t.Errorf("want ORDER BY %s LIMIT 500:\n%s", tc.order, sql)
			}
			wantFrom := "\nFROM " + tab.Relation + " AS t\n"
			if tc.query != "" {
				wantFrom = "\nFROM q AS t\n"
				if !strings.HasPrefix(sql, "WITH q AS (\nSELECT * FROM items WHERE note <> 'x'\n)\n") {
					t.Errorf("the source query is not the statement's CTE q:\n%s", sql)
				}
			}
			if !strings.Contains(sql, wantFrom) {
				t.Errorf("want %q in:\n%s", wantFrom, sql)
			}
			// After a cursor, whether the row is at it, by the same row
			// comparison as the WHERE over the same parameters, each
			// converted once per page; then every column quoted. The
			// modified-at column is selected once, as a column.
			lead, wantLay := "", pageLayout{at: -1}
			for _, c := range conds {
				if tc.after != nil && strings.Contains(c, ") >= (") {
					atCursor := strings.Replace(c, ") >= (", ") = (", 1)
					lead = anyCast.ReplaceAllString(atCursor, "(SELECT $0)") + ", "
					wantLay = pageLayout{at: 0, values: 1}
				}
			}
			wantLay.mod = wantLay.values
			sel := "SELECT " + lead + `t."Updated At", t."Tenant Id", t."odd""key", t."org", t."select"`
			if !strings.Contains(sql, sel+"\nFROM") {
				t.Errorf("want %s in:\n%s", sel, sql)
			}
			if lay != wantLay {
				t.Errorf("layout %+v, want %+v", lay, wantLay)
			}
		})
	}
}

// pred is a regular expression for one predicate, whose capture groups
// are the numbers of the parameters that must carry values.
type pred struct {
	re     string
	values []string
}

// TestPageLeadColumns checks what a page sends for every row besides the
// columns: the modified-at a second time only when the data column cannot
// stand in for it, and the flag of the rows at the cursor only when the
// client cannot tell them itself.
func TestPageLeadColumns(t *testing.T) {
	to := "2024-02-01 00:00:00+00"
	mod := "2024-01-15 12:00:00+00"
	after := &watermark.Cursor{ModifiedAt: &mod, Key: []string{"41"}}
	table := func(keyOID uint32, keyType string) *Table {
		return &Table{
			Spec: Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "at"},
			Columns: []formats.Column{
				{Name: "note", TypeOID: pgtype.TextOID, Typmod: -1, TypeName: "text"},
				{Name: "at", TypeOID: pgtype.TimestamptzOID, Typmod: -1, TypeName: "timestamp with time zone"},
				{Name: "id", TypeOID: keyOID, Typmod: -1, TypeName: keyType},
			},
			Relation: `"public"."items"`,
			ModKind:  watermark.Timestamptz,
			modIdx:   1,
			keyIdx:   []int{2},
		}
	}
	const cols = `t."note", t."at", t."id"`
	flag := `(t."at", t."id") = ((SELECT CAST($2::text AS timestamp with time zone)), (SELECT CAST($1::text AS %s)))`
	for _, tc := range []struct {
		name        string
		tab         *Table
		exprs       func([]string) []string
		exactTwins  bool
		after       *watermark.Cursor
		clientTwins bool
		sel         string
		lay         pageLayout
	}{
		{name: "first page", tab: table(pgtype.Int8OID, "bigint"), exactTwins: true,
			sel: cols, lay: pageLayout{mod: 1, at: -1}},
		{name: "after the caller's cursor", tab: table(pgtype.Int8OID, "bigint"), exactTwins: true, after: after,
			sel: fmt.Sprintf(flag, "bigint") + ", " + cols, lay: pageLayout{mod: 2, at: 0, values: 1}},
		{name: "after the last row, compared by the client", tab: table(pgtype.Int8OID, "bigint"), exactTwins: true, after: after, clientTwins: true,
			sel: cols, lay: pageLayout{mod: 1, at: -1}},
		{name: "uuid key", tab: table(pgtype.UUIDOID, "uuid"), exactTwins: true,
			sel: cols, lay: pageLayout{mod: 1, at: -1}},
		{name: "numeric key: 1.0 = 1.00", tab: table(pgtype.NumericOID, "numeric"), exactTwins: false, after: after,
			sel: fmt.Sprintf(flag, "numeric") + ", " + cols, lay: pageLayout{mod: 2, at: 0, values: 1}},
		{name: "text key: collations", tab: table(pgtype.TextOID, "text"), exactTwins: false,
			sel: cols, lay: pageLayout{mod: 1, at: -1}},
		{name: "bpchar key: trailing blanks", tab: table(pgtype.BPCharOID, "character"), exactTwins: false,
			sel: cols, lay: pageLayout{mod: 1, at: -1}},
		{name: "key selected as an expression", tab: table(pgtype.Int8OID, "bigint"), exactTwins: false,
			exprs: func(q []string) []string { q[2] += "::text"; return q },
			sel:   `t."note", t."at", t."id"::text, t."id"::text`, lay: pageLayout{mod: 1, at: -1}},
		{name: "modified-at selected as an expression", tab: table(pgtype.Int8OID, "bigint"), exactTwins: false, after: after,
			exprs: func(q []string) []string { q[1] = "pg_catalog.format('%s', " + q[1] + ")"; return q },
			sel:   `t."at", ` + fmt.Sprintf(flag, "bigint") + `, t."note", pg_catalog.format('%s', t."at"), t."id"`, lay: pageLayout{mod: 0, at: 1, values: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exprs := tc.tab.Quoted()
			if tc.exprs != nil {
				exprs = tc.exprs(exprs)
			}
			sc := (&Source{}).NewScanner(tc.tab, exprs)
			if sc.exactTwins != tc.exactTwins {
				t.Errorf("exactTwins = %v, want %v", sc.exactTwins, tc.exactTwins)
			}
			sql, _, lay := sc.pageSQL(watermark.Interval{To: to}, tc.after, false, 500, tc.clientTwins)
			if want := "SELECT " + tc.sel + "\nFROM"; !strings.HasPrefix(sql, want) {
				t.Errorf("want %s in:\n%s", want, sql)
			}
			if lay != tc.lay {
				t.Errorf("layout %+v, want %+v", lay, tc.lay)
			}
		})
	}
}
