package export_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// keyType is one type tried as a key: values are SQL literals, distinct
// under the type's btree equality, listed in no particular order.
type keyType struct {
	name   string
	typ    string
	setup  []string
	values []string
}

// keyTypes lists every type that can carry a btree unique index, with the
// values whose text forms are the hardest to bring back exactly.
var keyTypes = []keyType{
	{name: "int2", typ: "int2", values: []string{"-32768", "-1", "0", "1", "32767"}},
	{name: "int4", typ: "int4", values: []string{"-2147483648", "0", "7", "2147483647"}},
	{name: "int8", typ: "int8", values: []string{"-9223372036854775808", "0", "9007199254740993", "9223372036854775807"}},
	{name: "numeric(12,3)", typ: "numeric(12,3)", values: []string{"-1.5", "0", "0.001", "123456789.123", "10"}},
	{name: "numeric", typ: "numeric", values: []string{"'NaN'", "'-Infinity'", "'Infinity'", "-1e30", "0.000000000000000000001",
		"1.10", "2", "123456789012345678901234567890.123456789", "0"}},
	{name: "float4", typ: "float4", values: []string{"'-Infinity'", "-1.5", "'-0'", "1.1", "3.4e38", "1e-45", "'NaN'", "'Infinity'"}},
	{name: "float8", typ: "float8", values: []string{"'-Infinity'", "-0.1", "'-0'", "1e-300", "0.30000000000000004", "5e-324",
		"1.7976931348623157e308", "'NaN'", "'Infinity'"}},
	{name: "text", typ: "text", values: []string{"''", "' '", "'a'", "'A'", "'a b'", "'é'", "'z'", `E'\t'`, "'a '"}},
	{name: "varchar", typ: "varchar(10)", values: []string{"''", "'a'", "'B'", "'b'", "' b'"}},
	// char(n) pads with blanks and ignores them when comparing: '' is ' '.
	{name: "char", typ: "char(3)", values: []string{"''", "'a'", "'a b'", "'ab'", "'abc'", "' a'"}},
	{name: "bpchar", typ: "bpchar", values: []string{"''", "'a'", "'a b'", "'b'"}},
	{name: "name", typ: "name", values: []string{"''", "'a'", "'Z'", "'with space'"}},
	{name: "citext", typ: "citext", setup: []string{"CREATE EXTENSION citext"}, values: []string{"''", "'a'", "'B'", "'c'", "'Ä'"}},
	{name: "bytea", typ: "bytea", values: []string{`''::bytea`, `'\x00'`, `'\x0001'`, `'\xff'`, `'\x5c'`}},
	{name: "uuid", typ: "uuid", values: []string{"'00000000-0000-0000-0000-000000000000'", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
		"'ffffffff-ffff-ffff-ffff-ffffffffffff'"}},
	{name: "bool", typ: "bool", values: []string{"false", "true"}},
	{name: "date", typ: "date", values: []string{"'-infinity'", "'4713-01-01 BC'", "'2026-01-01'", "'5874897-12-31'", "'infinity'"}},
	{name: "time", typ: "time", values: []string{"'00:00'", "'12:34:56.789012'", "'23:59:59.999999'", "'24:00'"}},
	{name: "timetz", typ: "timetz", values: []string{"'12:00+00'", "'12:00+05'", "'07:00+00'", "'11:00:00.000001-01:30'"}},
	{name: "timestamp", typ: "timestamp", values: []string{"'-infinity'", "'4713-01-01 00:00 BC'", "'2026-01-01 00:00:00.000001'", "'infinity'"}},
	{name: "timestamptz", typ: "timestamptz", values: []string{"'-infinity'", "'2026-01-01 00:00:00.000001+05'", "'1999-12-31 23:59:59.999999+00'", "'infinity'"}},
	// '1 mon' equals '30 days' for btree, so only one of them is here.
	{name: "interval", typ: "interval", values: []string{"'-1 day'", "'0'", "'1 mon'", "'1 day 00:00:00.000001'", "'P1Y2M3DT4H5M6.5S'",
		"'-178000000 years'"}},
	{name: "inet", typ: "inet", values: []string{"'10.0.0.1'", "'10.0.0.1/8'", "'::1'", "'192.168.0.0/16'", "'::ffff:1.2.3.4'"}},
	{name: "cidr", typ: "cidr", values: []string{"'10.0.0.0/8'", "'10.0.0.0/16'", "'::/0'", "'192.168.1.1/32'"}},
	{name: "macaddr", typ: "macaddr", values: []string{"'08:00:2b:01:02:03'", "'00:00:00:00:00:00'", "'ff:ff:ff:ff:ff:ff'"}},
	{name: "macaddr8", typ: "macaddr8", values: []string{"'08:00:2b:01:02:03:04:05'", "'00:00:00:00:00:00:00:00'"}},
	{name: "money", typ: "money", values: []string{"-1.5", "0", "12.34", "92233720368547758.07"}},
	{name: "oid", typ: "oid", values: []string{"0", "1", "4294967295"}},
	{name: "enum", typ: "mood", setup: []string{"CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', '')"},
		values: []string{"'happy'", "'sad'", "''", "'ok'"}},
	{name: "domain", typ: "code", setup: []string{"CREATE DOMAIN code AS text CHECK (VALUE <> 'x')"},
		values: []string{"''", "'a'", "'b c'"}},
	{name: "bit", typ: "bit(4)", values: []string{"B'0000'", "B'0101'", "B'1111'"}},
	{name: "varbit", typ: "varbit", values: []string{"B''", "B'0'", "B'00'", "B'1'", "B'101'"}},
	{name: "pg_lsn", typ: "pg_lsn", values: []string{"'0/0'", "'16/B374D848'", "'FFFFFFFF/FFFFFFFF'"}},
	{name: "tsvector", typ: "tsvector", values: []string{"''", "'a'", "'a:1 b:2'", "'''x y'''"}},
	{name: "char1", typ: `"char"`, values: []string{`'a'`, `'b'`, `''`}},
	// A collation that orders otherwise than bytes: the bound cursor must
	// compare under the column's collation, as ORDER BY does.
	{name: "text collate", typ: `text COLLATE "en-x-icu"`, values: []string{"'a'", "'B'", "'b'", "'A'", "'_'", "'ä'"}},
}

func (kt keyType) sqlValue(v string) string {
	if typ, _, ok := strings.Cut(kt.typ, " COLLATE"); ok {
		return fmt.Sprintf("CAST(%s AS %s)", v, typ)
	}
	return fmt.Sprintf("CAST(%s AS %s)", v, kt.typ)
}

// TestKeyTypes exports a table keyed by each type, alone in pages of two
// rows across ties and the NULL-stamped phase, and composite with a crash
// and a resume from the checkpoint in the middle; the lake must hold every
// source row exactly once.
func TestKeyTypes(t *testing.T) {
	for _, kt := range keyTypes {
		t.Run(kt.name, func(t *testing.T) {
			var rows []string
			for i, v := range kt.values {
				stamp := [...]string{"NULL", "'2026-01-01 00:00:00+00'", "'2026-01-02 00:00:00+00'"}[i%3]
				rows = append(rows, fmt.Sprintf("(%s, %s, %d)", kt.sqlValue(v), stamp, i+1))
			}
			vals := make([]string, len(kt.values))
			for i, v := range kt.values {
				vals[i] = kt.sqlValue(v)
			}
			setup := append(slices.Clone(kt.setup),
				fmt.Sprintf(`CREATE TABLE items (id %s PRIMARY KEY, updated_at timestamptz, n int NOT NULL)`, kt.typ),
				"INSERT INTO items VALUES "+strings.Join(rows, ", "),
				fmt.Sprintf(`CREATE TABLE pairs (k %s, g int, updated_at timestamptz, n int NOT NULL, pad text, PRIMARY KEY (k, g))`, kt.typ),
				fmt.Sprintf(`INSERT INTO pairs SELECT (ARRAY[%s])[1 + g %% %d], g, '2026-01-01+00', g, md5(g::text)
					FROM generate_series(1, 3000) g`, strings.Join(vals, ", "), len(vals)))
			l := newLake(t, setup...)

			opts := l.options()
			opts.PageRows = 2
			res := l.mustExport(opts)
			if res.Commit.Metrics.RowsTransferred != int64(len(kt.values)) {
				t.Errorf("alone: read %d rows, want %d", res.Commit.Metrics.RowsTransferred, len(kt.values))
			}
			l.checkRows("items")
			l.checkEveryCursor(pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})

			l.model = "pairs"
			opts = l.options()
			opts.Source = pgsource.Spec{Table: "public.pairs", PrimaryKey: []string{"k", "g"}, ModifiedAt: "updated_at"}
			opts.PageRows = 97
			opts.TargetFileBytes = 1 // a file per batch of rows
			l.exportCrashing(opts, "after-checkpoint", 2)
			res = l.mustExport(opts)
			if !res.Resumed {
				t.Fatal("composite: the second attempt did not resume")
			}
			if len(res.Commit.Added) != 3 {
				t.Errorf("composite: %d files, want 3", len(res.Commit.Added))
			}
			l.checkRows("pairs")
		})
	}
}

// TestMixedCompositeKeyResumes pages a key of several awkward types at
// once and resumes it from a checkpoint.
func TestMixedCompositeKeyResumes(t *testing.T) {
	l := newLake(t, "CREATE EXTENSION citext", "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
		`CREATE TABLE items (e mood, f float8, c citext, b bytea, i inet, iv interval, nu numeric, id int,
			updated_at timestamptz, n int NOT NULL, PRIMARY KEY (e, f, c, b, i, iv, nu, id))`,
		`INSERT INTO items SELECT (ARRAY['sad', 'ok', 'happy']::mood[])[1 + g % 3],
			(ARRAY['NaN', '-0', '0.1', 'Infinity']::float8[])[1 + g / 3 % 4],
			(ARRAY['', 'a', 'B'])[1 + g / 12 % 3],
			(ARRAY['\x'::bytea, '\x00', '\xff'])[1 + g / 36 % 3],
			(ARRAY['10.0.0.1', '10.0.0.1/8']::inet[])[1 + g / 108 % 2],
			(ARRAY['1 day', 'P1Y']::interval[])[1 + g / 216 % 2],
			(ARRAY['NaN', '1.10', '-1e-30']::numeric[])[1 + g / 432 % 3],
			g / 1296, '2026-01-01+00', g
		FROM generate_series(1, 3000) g`)
	opts := l.options()
	opts.Source.PrimaryKey = []string{"e", "f", "c", "b", "i", "iv", "nu", "id"}
	opts.PageRows = 5
	opts.TargetFileBytes = 1
	l.exportCrashing(opts, "after-checkpoint", 1)
	res := l.mustExport(opts)
	if !res.Resumed {
		t.Fatal("the second attempt did not resume")
	}
	l.checkRows("items")
	for _, f := range res.Commit.Added {
		if len(f.Last.Key) != 8 {
			t.Fatalf("cursor %v", f.Last.Key)
		}
	}
}

// checkRows compares the tags n of the lake's rows with the source's: none
// missing, none twice.
func (l *lake) checkRows(table string) {
	l.t.Helper()
	got := l.query("SELECT count(*), count(DISTINCT n), coalesce(string_agg(n::varchar, ',' ORDER BY n), '') FROM lake")[0]
	want := l.pgQuery("SELECT count(*), count(DISTINCT n), coalesce(string_agg(n::text, ',' ORDER BY n), '') FROM " + table)[0]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		l.t.Errorf("%s: lake %v, source %v", table, got, want)
	}
}

// checkEveryCursor scans the table in pages of two rows, then again from
// the cursor of each row, as a resumed run would after a checkpoint at
// that row: the rest must follow exactly.
func (l *lake) checkEveryCursor(spec pgsource.Spec) {
	l.t.Helper()
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	tbl, err := src.Discover(ctx, spec)
	if err != nil {
		l.t.Fatal(err)
	}
	m, err := formats.NewMapping(tbl.Columns, formats.Options{})
	if err != nil {
		l.t.Fatal(err)
	}
	nIdx := slices.IndexFunc(tbl.Columns, func(c formats.Column) bool { return c.Name == "n" })
	rng := watermark.Interval{To: "infinity", IncludeNull: true}
	scan := func(start *manifest.Cursor) (ns []int32, cursors []*manifest.Cursor) {
		sc := src.NewScanner(tbl, m.SelectExprs(tbl.Quoted()))
		sc.PageRows = 2
		err := sc.Scan(ctx, rng, start, func(r *pgsource.Row) error {
			c, err := r.Cursor()
			if err != nil {
				return err
			}
			// The cursor is kept as JSON in the checkpoint.
			b, _ := json.Marshal(c)
			var back manifest.Cursor
			if err := json.Unmarshal(b, &back); err != nil {
				return err
			}
			ns = append(ns, int32(binary.BigEndian.Uint32(r.Values[nIdx])))
			cursors = append(cursors, &back)
			return nil
		})
		if err != nil {
			l.t.Fatalf("scan from %v: %v", start, err)
		}
		return ns, cursors
	}
	all, cursors := scan(nil)
	for k, c := range cursors {
		rest, _ := scan(c)
		if fmt.Sprint(rest) != fmt.Sprint(all[k+1:]) {
			l.t.Errorf("resumed at %v (row %d): got %v, want %v", c, all[k], rest, all[k+1:])
		}
	}
}

// TestEmptyStringKeyIsAValue: an empty string is a key value, not NULL,
// also when it is the first key a scan remembers, and as a tenant.
func TestEmptyStringKeyIsAValue(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (tenant text, id text, updated_at timestamptz, n int NOT NULL, PRIMARY KEY (tenant, id))`,
		`INSERT INTO items SELECT '', g::text, '2026-01-01+00', g FROM generate_series(1, 5) g`,
		`INSERT INTO items SELECT 'other', g::text, '2026-01-01+00', 100 + g FROM generate_series(1, 5) g`)
	tenant := ""
	opts := l.options()
	opts.Source.PrimaryKey = []string{"tenant", "id"}
	opts.Source.TenantColumn, opts.Source.Tenant = "tenant", &tenant
	opts.PageRows = 2
	res := l.mustExport(opts)
	if got := res.Commit.Metrics.RowsTransferred; got != 5 {
		t.Fatalf("tenant '': read %d rows, want 5", got)
	}
	if got := res.Commit.Added[0].Last.Key; got[0] != "" || got[1] != "5" {
		t.Fatalf("last cursor %q", got)
	}
	if got := scalar(t, l.query("SELECT string_agg(n::varchar, ',' ORDER BY n) FROM lake")); got != "1,2,3,4,5" {
		t.Fatalf("lake holds %s", got)
	}

	// The only new row of an incremental run has the empty key.
	l.model = "single"
	l.exec(`CREATE TABLE single (id text PRIMARY KEY, updated_at timestamptz, n int)`,
		`INSERT INTO single VALUES ('a', now(), 1)`)
	opts = l.options()
	opts.Source = pgsource.Spec{Table: "public.single", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
	l.mustExport(opts)
	l.exec(`INSERT INTO single VALUES ('', now(), 2)`)
	res = l.mustExport(opts)
	if got := res.Commit.Added; len(got) != 1 || got[0].Last.Key[0] != "" {
		t.Fatalf("second run added %+v", got)
	}
	if got := scalar(t, l.query("SELECT string_agg(n::varchar, ',' ORDER BY n) FROM lake")); got != "1,2" {
		t.Fatalf("lake holds %s", got)
	}
}

// TestKeyErrorsNameTheRow: a duplicate (modified_at, key) and a NULL key
// are reported with the key of the very row that has them.
func TestKeyErrorsNameTheRow(t *testing.T) {
	l := newLake(t, "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
		`CREATE TABLE items (k mood, id int, updated_at timestamptz, n int, PRIMARY KEY (k, id))`,
		`INSERT INTO items SELECT (ARRAY['sad', 'ok', 'happy']::mood[])[1 + g % 3], g, '2026-01-01+00'::timestamptz + g * interval '1 hour', g
		 FROM generate_series(1, 9) g`)
	for _, tc := range []struct {
		name, query string
		want        error
		key         string
	}{
		{"duplicate", `SELECT * FROM items UNION ALL SELECT k, id, updated_at, n + 100 FROM items WHERE id = 5`,
			pgsource.ErrDuplicateKey, `{"id":"5","k":"happy","updated_at":"2026-01-01 05:00:00.000000+00"}`},
		{"null", `SELECT k, CASE WHEN id = 7 THEN NULL ELSE id END AS id, updated_at, n FROM items`,
			pgsource.ErrNullKey, `{"id":null,"k":"ok","updated_at":"2026-01-01 07:00:00.000000+00"}`},
		{"null enum", `SELECT CASE WHEN id = 4 THEN NULL ELSE k END AS k, id, updated_at, n FROM items`,
			pgsource.ErrNullKey, `{"id":"4","k":null,"updated_at":"2026-01-01 04:00:00.000000+00"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, pageRows := range []int{2, 3, 100} {
				l.model = fmt.Sprintf("%s-%d", strings.ReplaceAll(tc.name, " ", "-"), pageRows)
				opts := l.options()
				opts.Source = pgsource.Spec{Query: tc.query, PrimaryKey: []string{"k", "id"}, ModifiedAt: "updated_at"}
				opts.PageRows = pageRows
				_, err := l.export(opts)
				if !errors.Is(err, tc.want) {
					t.Fatalf("page rows %d: got %v, want %v", pageRows, err, tc.want)
				}
				if !strings.Contains(err.Error(), tc.key) {
					t.Errorf("page rows %d: %v does not name %s", pageRows, err, tc.key)
				}
			}
		})
	}
}

// TestKeyTiesUnderTheTypesEquality: keys that differ in bytes but are
// equal to the type's comparison (numeric 1.0 and 1.00, citext 'a' and
// 'A', float8 -0 and 0) cannot be paged through; a source_query yielding
// them across a page boundary stops with the duplicate error rather than
// paging forever and writing rows again.
func TestKeyTiesUnderTheTypesEquality(t *testing.T) {
	l := newLake(t, "CREATE EXTENSION citext")
	for _, tc := range []struct{ name, values string }{
		{"numeric", "1.0::numeric, 1.00, 1.000, 2"},
		{"citext", "'a'::citext, 'A', 'b'"},
		{"float8", "'-0'::float8, '0', '1'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, pageRows := range []int{2} {
				l.model = fmt.Sprintf("%s-%d", tc.name, pageRows)
				opts := l.options()
				opts.Source = pgsource.Spec{PrimaryKey: []string{"id"}, ModifiedAt: "updated_at",
					Query: fmt.Sprintf("SELECT id, '2026-01-01+00'::timestamptz AS updated_at, 1 AS n FROM unnest(ARRAY[%s]) id", tc.values)}
				opts.PageRows = pageRows
				pages := 0
				opts.Failpoint = func(name string) {
					// A scan that pages on is stopped by ending its session.
					if name == "after-page" {
						if pages++; pages == 100 {
							l.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'highwater'`)
						}
					}
				}
				_, err := l.export(opts)
				if pages >= 100 {
					t.Errorf("page rows %d: paged on for %d pages", pageRows, pages)
				}
				if !errors.Is(err, pgsource.ErrDuplicateKey) {
					t.Errorf("page rows %d: got %v, want %v", pageRows, err, pgsource.ErrDuplicateKey)
				}
			}
		})
	}
}

// TestNumericCursorIsNumericOut: the cursor of a numeric key read from its
// binary form is numeric_out's text, digit for digit and to its scale.
func TestNumericCursorIsNumericOut(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id numeric(38,18) PRIMARY KEY, updated_at timestamptz, txt text)`,
		`INSERT INTO items SELECT v, '2026-01-01+00'::timestamptz, v::text FROM (
			SELECT round(g::numeric / 7 * power(10::numeric, g % 36 - 18), (g % 19)) * (1 - 2 * (g % 2)) AS v
			FROM generate_series(1, 2000) g
			UNION ALL SELECT unnest(ARRAY[0, 0.000000000000000001, -0.000000000000000001, 10000, 99999999999999999999.999999999999999999,
				-99999999999999999999.999999999999999999, 1.5, 0.0001, 100000000])) s ON CONFLICT DO NOTHING`,
		`UPDATE items SET txt = id::text`)
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	tbl, err := src.Discover(ctx, pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	sc := src.NewScanner(tbl, tbl.Quoted()) // the id's binary value
	n := 0
	err = sc.Scan(ctx, watermark.Interval{To: "infinity", IncludeNull: true}, nil, func(r *pgsource.Row) error {
		c, err := r.Cursor()
		if err != nil {
			return err
		}
		if want := string(r.Values[2]); c.Key[0] != want {
			t.Errorf("cursor %q, numeric_out %q", c.Key[0], want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("only %d values", n)
	}
}
