package pgsource_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// open creates a database, runs setup in it and connects a Source to it.
func open(t *testing.T, setup ...string) (*pgsource.Source, string) {
	t.Helper()
	db := pg.NewDatabase(t)
	pgtest.Exec(t, db, setup...)
	src, err := pgsource.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(t.Context()) })
	return src, db
}

// connect opens a plain connection beside the Source.
func connect(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(t.Context()) })
	return conn
}

// holds asks the server whether a boolean expression over args is true.
func holds(t *testing.T, conn *pgx.Conn, expr string, args ...any) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(t.Context(), "SELECT "+expr, args...).Scan(&ok); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return ok
}

// TestDiscoverColumns checks that discovery lists the live columns in
// order and resolves domains (nested ones, and those under arrays) to
// their base types with the domain's own typmod.
func TestDiscoverColumns(t *testing.T) {
	src, db := open(t,
		`CREATE DOMAIN money2 AS numeric(12,2)`,
		`CREATE DOMAIN positive_money AS money2 CHECK (VALUE > 0)`,
		`CREATE TYPE mood AS ENUM ('sad', 'ok')`,
		`CREATE TABLE items (
			id bigint PRIMARY KEY,
			updated_at timestamptz,
			gone int,
			price positive_money NOT NULL,
			tags text[],
			prices money2[],
			mood mood,
			"Name" varchar(20))`,
		`ALTER TABLE items DROP COLUMN gone`)
	tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tab.Columns {
		names = append(names, c.Name)
	}
	if want := []string{"id", "updated_at", "price", "tags", "prices", "mood", "Name"}; !slices.Equal(names, want) {
		t.Fatalf("columns %q, want %q", names, want)
	}
	if tab.Relation != `public.items` || tab.ModKind != watermark.Timestamptz {
		t.Errorf("relation %s, kind %v", tab.Relation, tab.ModKind)
	}
	conn := connect(t, db)
	col := func(name string) (c struct {
		oid, elem uint32
		typmod    int32
		typtype   byte
		typeName  string
		notNull   bool
	}) {
		f, ok := tab.Column(name)
		if !ok {
			t.Fatalf("no column %s", name)
		}
		c.oid, c.elem, c.typmod, c.typtype, c.typeName, c.notNull = f.TypeOID, f.ElemOID, f.Typmod, f.TypType, f.TypeName, f.NotNull
		return c
	}
	price := col("price")
	if price.oid != pgtype.NumericOID || price.typtype != 'b' || price.typeName != "public.positive_money" || !price.notNull {
		t.Errorf("price: %+v, want numeric resolved from the domain public.positive_money (type names are schema-qualified), not null", price)
	}
	if !holds(t, conn, "format_type($1, $2) = 'numeric(12,2)'", price.oid, price.typmod) {
		t.Errorf("price: typmod %d is not the domain's numeric(12,2)", price.typmod)
	}
	if tags := col("tags"); tags.oid != pgtype.TextArrayOID || tags.elem != pgtype.TextOID {
		t.Errorf("tags: %+v, want text[] of text", tags)
	}
	if prices := col("prices"); prices.elem != pgtype.NumericOID || !holds(t, conn, "$1::oid = 'money2[]'::regtype", prices.oid) {
		t.Errorf("prices: %+v, want money2[] with numeric elements", prices)
	}
	if mood := col("mood"); mood.typtype != 'e' || !holds(t, conn, "$1::oid = 'mood'::regtype", mood.oid) {
		t.Errorf("mood: %+v, want the enum", mood)
	}
	if name := col("Name"); name.oid != pgtype.VarcharOID || name.typeName != "character varying(20)" || name.notNull {
		t.Errorf("Name: %+v", name)
	}
	if updated := col("updated_at"); updated.notNull {
		t.Errorf("updated_at: NOT NULL reported on a nullable column")
	}
}

// TestDiscoverModifiedAtKinds checks each type that can order changes, a
// domain over one, and a type that cannot.
func TestDiscoverModifiedAtKinds(t *testing.T) {
	src, db := open(t, `CREATE DOMAIN stamp AS timestamptz`)
	for _, tc := range []struct {
		typ  string
		kind watermark.Kind
		bad  bool
	}{
		{typ: "timestamptz", kind: watermark.Timestamptz},
		{typ: "timestamp(3)", kind: watermark.Timestamp},
		{typ: "date", kind: watermark.Date},
		{typ: "stamp", kind: watermark.Timestamptz},
		{typ: "text", bad: true},
		{typ: "bigint", bad: true},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			table := "m_" + strings.NewReplacer("(", "", ")", "").Replace(tc.typ)
			// The source's own session is read-only.
			pgtest.Exec(t, db, "CREATE TABLE "+table+" (id int PRIMARY KEY, m "+tc.typ+")")
			tab, err := src.Discover(t.Context(), pgsource.Spec{Table: table, PrimaryKey: []string{"id"}, ModifiedAt: "m"})
			if tc.bad {
				if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "cannot order changes") {
					t.Fatalf("err = %v, want ErrBadModel for a modified-at column that cannot order changes", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tab.ModKind != tc.kind {
				t.Errorf("kind %v, want %v", tab.ModKind, tc.kind)
			}
		})
	}
}

// TestDiscoverKeyIndex checks that a model is accepted only when a
// unique, plain btree index covers (a subset of) its key, since keyset
// paging skips rows of a key that is not unique.
func TestDiscoverKeyIndex(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup []string
		key   []string
		ok    bool
	}{
		{name: "primary key", setup: []string{`CREATE TABLE t (id bigint PRIMARY KEY, m timestamptz)`}, key: []string{"id"}, ok: true},
		{name: "composite primary key", setup: []string{`CREATE TABLE t (a int, b text, m timestamptz, PRIMARY KEY (a, b))`}, key: []string{"a", "b"}, ok: true},
		{name: "unique index on a subset of the key", setup: []string{`CREATE TABLE t (a int, b text, m timestamptz)`, `CREATE UNIQUE INDEX ON t (a)`}, key: []string{"a", "b"}, ok: true},
		{name: "unique constraint", setup: []string{`CREATE TABLE t (a int, m timestamptz, UNIQUE (a))`}, key: []string{"a"}, ok: true},
		{name: "no index", setup: []string{`CREATE TABLE t (id bigint, m timestamptz)`}, key: []string{"id"}},
		{name: "index not unique", setup: []string{`CREATE TABLE t (id bigint, m timestamptz)`, `CREATE INDEX ON t (id)`}, key: []string{"id"}},
		{name: "unique on another column", setup: []string{`CREATE TABLE t (id bigint, code text UNIQUE, m timestamptz)`}, key: []string{"id"}},
		{name: "unique on more than the key", setup: []string{`CREATE TABLE t (a int, b int, m timestamptz, UNIQUE (a, b))`}, key: []string{"a"}},
		{name: "partial unique index", setup: []string{`CREATE TABLE t (id bigint, m timestamptz)`, `CREATE UNIQUE INDEX ON t (id) WHERE id > 0`}, key: []string{"id"}},
		{name: "expression unique index", setup: []string{`CREATE TABLE t (id bigint, m timestamptz)`, `CREATE UNIQUE INDEX ON t ((id + 0))`}, key: []string{"id"}},
		{name: "key only in INCLUDE", setup: []string{`CREATE TABLE t (a int, b int, m timestamptz)`, `CREATE UNIQUE INDEX ON t (a) INCLUDE (b)`}, key: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := open(t, tc.setup...)
			_, err := src.Discover(t.Context(), pgsource.Spec{Table: "t", PrimaryKey: tc.key, ModifiedAt: "m"})
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && (!errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "no unique constraint or index")):
				t.Fatalf("err = %v, want ErrBadModel for a key without a unique index", err)
			}
		})
	}
}

// TestDiscoverWarnsWithoutModifiedAtIndex: paging works without an index
// leading with the modified-at column, but scans the table each page.
func TestDiscoverWarnsWithoutModifiedAtIndex(t *testing.T) {
	src, db := open(t, `CREATE TABLE t (id bigint PRIMARY KEY, m timestamptz)`)
	spec := pgsource.Spec{Table: "t", PrimaryKey: []string{"id"}, ModifiedAt: "m"}
	tab, err := src.Discover(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Warnings) != 1 || !strings.Contains(tab.Warnings[0], `("m", "id")`) {
		t.Errorf("warnings %q, want one naming the index to create", tab.Warnings)
	}
	// The source's own session is read-only.
	pgtest.Exec(t, db, `CREATE INDEX ON t (m, id)`)
	if tab, err = src.Discover(t.Context(), spec); err != nil || len(tab.Warnings) != 0 {
		t.Errorf("with the index: warnings %q, err %v", tab.Warnings, err)
	}
}

// TestDiscoverRefusesReservedPrefix: the lake's own columns start with
// _hw_, so a source column of that prefix, in any case, in a table or a
// query, is refused rather than shadowed.
func TestDiscoverRefusesReservedPrefix(t *testing.T) {
	src, _ := open(t,
		`CREATE TABLE items (id bigint PRIMARY KEY, m timestamptz, note text)`,
		`CREATE TABLE clash (id bigint PRIMARY KEY, m timestamptz, "_HW_Version" int)`)
	for _, tc := range []struct {
		name string
		spec pgsource.Spec
		col  string
	}{
		{"table", pgsource.Spec{Table: "clash"}, "_HW_Version"},
		{"query", pgsource.Spec{Query: "SELECT id, m, note AS _hw_op FROM items"}, "_hw_op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.PrimaryKey, tc.spec.ModifiedAt = []string{"id"}, "m"
			_, err := src.Discover(t.Context(), tc.spec)
			if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "reserved prefix _hw_") || !strings.Contains(err.Error(), tc.col) {
				t.Fatalf("err = %v, want ErrBadModel naming %s and the reserved prefix", err, tc.col)
			}
		})
	}
	// The same query without the clash is accepted: the refusal is the
	// name's, not the query's.
	if _, err := src.Discover(t.Context(), pgsource.Spec{Query: "SELECT id, m, note AS hw_op FROM items", PrimaryKey: []string{"id"}, ModifiedAt: "m"}); err != nil {
		t.Fatalf("query without a reserved name: %v", err)
	}
}

// TestDiscoverRefusesBadModels: each refusal is ErrBadModel, with a
// message naming what is wrong.
func TestDiscoverRefusesBadModels(t *testing.T) {
	src, _ := open(t,
		`CREATE TABLE items (id bigint PRIMARY KEY, m timestamptz, org text)`,
		`CREATE VIEW items_v AS SELECT * FROM items`)
	tenant := "acme"
	for _, tc := range []struct {
		name string
		spec pgsource.Spec
		msg  string
	}{
		{"unknown table", pgsource.Spec{Table: "nope", PrimaryKey: []string{"id"}, ModifiedAt: "m"}, "does not exist"},
		{"view", pgsource.Spec{Table: "items_v", PrimaryKey: []string{"id"}, ModifiedAt: "m"}, "view"},
		{"unknown key", pgsource.Spec{Table: "items", PrimaryKey: []string{"idx"}, ModifiedAt: "m"}, `primary key column "idx" does not exist`},
		{"unknown modified-at", pgsource.Spec{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "mm"}, `modified-at column "mm" does not exist`},
		{"no key", pgsource.Spec{Table: "items", ModifiedAt: "m"}, "no primary key"},
		{"key named twice", pgsource.Spec{Table: "items", PrimaryKey: []string{"id", "id"}, ModifiedAt: "m"}, "named twice"},
		{"modified-at in the key", pgsource.Spec{Table: "items", PrimaryKey: []string{"id", "m"}, ModifiedAt: "m"}, "both"},
		{"tenant column without value", pgsource.Spec{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "m", TenantColumn: "org"}, "no tenant value"},
		{"tenant value without column", pgsource.Spec{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "m", Tenant: &tenant}, "no tenant column"},
		{"query with two columns of one name", pgsource.Spec{Query: "SELECT id, m, org AS id FROM items", PrimaryKey: []string{"id"}, ModifiedAt: "m"}, "two columns"},
		{"query that does not parse", pgsource.Spec{Query: "SELEKT 1", PrimaryKey: []string{"id"}, ModifiedAt: "m"}, "source_query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := src.Discover(t.Context(), tc.spec)
			if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want ErrBadModel saying %q", err, tc.msg)
			}
		})
	}
}

// TestUpperBound checks the two common bounds for each modified-at type:
// with nothing open it is the clock (for a date, the end of today); with a
// transaction open in another session (one that has not written: in READ
// COMMITTED it shows no xid, and its first INSERT still stamps its start)
// it is that transaction's start, in the column's type: the watermark a run
// to it commits (a date run reads to the end of the bound's day and commits
// the day itself, since the day can still receive rows).
func TestUpperBound(t *testing.T) {
	const tz = "Asia/Kathmandu" // +05:45: a conversion that cannot pass by accident
	for _, tc := range []struct {
		typ string
		// in converts a timestamptz ($1) to the column's type, and clock
		// the clock's bound, in the zone $2.
		in, clock string
	}{
		{"timestamptz", "$1::timestamptz", "$1::timestamptz"},
		{"timestamp", "($1::timestamptz AT TIME ZONE $2::text)", "($1::timestamptz AT TIME ZONE $2::text)"},
		{"date", "($1::timestamptz AT TIME ZONE $2::text)::date", "($1::timestamptz AT TIME ZONE $2::text)::date + 1"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			src, db := open(t, `CREATE TABLE t (id bigint PRIMARY KEY, m `+tc.typ+`)`)
			tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "t", PrimaryKey: []string{"id"}, ModifiedAt: "m"})
			if err != nil {
				t.Fatal(err)
			}
			conn := connect(t, db)
			clock := func() time.Time {
				var now time.Time
				if err := conn.QueryRow(t.Context(), "SELECT clock_timestamp()").Scan(&now); err != nil {
					t.Fatal(err)
				}
				return now
			}
			checkClock := func(when string) {
				t.Helper()
				before := clock()
				b, err := src.UpperBound(t.Context(), tab, tz)
				if err != nil {
					t.Fatal(err)
				}
				after := clock()
				if b.Kind != "clock" {
					t.Errorf("%s: kind %q (%s), want clock", when, b.Kind, b.Detail)
				}
				expr := "$2::text IS NOT NULL AND $3::text::" + tc.typ + " BETWEEN " + tc.clock + " AND " + strings.ReplaceAll(tc.clock, "$1", "$4")
				if !holds(t, conn, expr, before, tz, b.To, after) {
					t.Errorf("%s: bound %s is not the clock read between %s and %s", when, b.To, before, after)
				}
			}
			checkClock("nothing open")

			other := connect(t, db)
			tx, err := other.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var started time.Time
			if err := tx.QueryRow(t.Context(), "SELECT now()").Scan(&started); err != nil {
				t.Fatal(err)
			}
			b, err := src.UpperBound(t.Context(), tab, tz)
			if err != nil {
				t.Fatal(err)
			}
			if b.Kind != "oldest_transaction" {
				t.Errorf("open transaction: kind %q (%s), want oldest_transaction", b.Kind, b.Detail)
			}
			if !holds(t, conn, "$2::text IS NOT NULL AND $3::text::"+tc.typ+" = "+tc.in, started, tz, b.Watermark) {
				t.Errorf("open transaction: bound %s is not the start %s of the open transaction", b.Watermark, started)
			}
			if b.StuckSince != nil {
				t.Errorf("a transaction younger than the cap is reported stuck since %s", *b.StuckSince)
			}
			if err := tx.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			checkClock("after the transaction ended")
		})
	}
}
