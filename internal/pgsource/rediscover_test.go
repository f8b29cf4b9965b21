package pgsource_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestRediscoverSeesEveryTableChange: discovery reads the catalog anew at
// every call, on one session too, however few statements it takes, so
// each change of the table that the identity or the mapping depends on
// shows in the next Discover: an added and a retyped column (of a table
// and of a source_query), a key that lost its unique index, a table
// dropped and recreated, and inheritance children added.
func TestRediscoverSeesEveryTableChange(t *testing.T) {
	src, db := open(t, `CREATE TABLE t (id bigint PRIMARY KEY, m timestamptz NOT NULL, note text)`)
	spec := pgsource.Spec{Table: "t", PrimaryKey: []string{"id"}, ModifiedAt: "m"}
	query := pgsource.Spec{Query: "SELECT * FROM t", PrimaryKey: []string{"id"}, ModifiedAt: "m"}
	discover := func(spec pgsource.Spec) *pgsource.Table {
		t.Helper()
		tab, err := src.Discover(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	names := func(tab *pgsource.Table) []string {
		var n []string
		for _, c := range tab.Columns {
			n = append(n, c.Name)
		}
		return n
	}
	first, firstQuery := discover(spec), discover(query)

	pgtest.Exec(t, db, `ALTER TABLE t ADD COLUMN extra int`)
	for _, tab := range []*pgsource.Table{discover(spec), discover(query)} {
		if got, want := names(tab), []string{"id", "m", "note", "extra"}; !slices.Equal(got, want) {
			t.Fatalf("after ADD COLUMN (%s): columns %q, want %q", tab.Relation, got, want)
		}
	}

	pgtest.Exec(t, db, `ALTER TABLE t ALTER COLUMN note TYPE varchar(5)`)
	for _, tab := range []*pgsource.Table{discover(spec), discover(query)} {
		if c, _ := tab.Column("note"); c.TypeOID != pgtype.VarcharOID {
			t.Fatalf("after ALTER TYPE (%s): note is %+v, want varchar", tab.Relation, c)
		}
	}
	if c, _ := discover(spec).Column("note"); c.TypeName != "character varying(5)" {
		t.Fatalf("after ALTER TYPE: note is named %q, want character varying(5)", c.TypeName)
	}

	pgtest.Exec(t, db, `ALTER TABLE t DROP CONSTRAINT t_pkey`)
	if _, err := src.Discover(t.Context(), spec); !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "no unique constraint or index") {
		t.Fatalf("after the key lost its index: err = %v, want ErrBadModel", err)
	}

	pgtest.Exec(t, db, `DROP TABLE t`, `CREATE TABLE t (id bigint PRIMARY KEY, m timestamptz NOT NULL, note text)`)
	again := discover(spec)
	if again.RelOID == first.RelOID || again.Relation != first.Relation {
		t.Fatalf("recreated table: oid %d (was %d), relation %s (was %s): want another oid of the same name",
			again.RelOID, first.RelOID, again.Relation, first.Relation)
	}
	if got := discover(query); got.QueryHash != firstQuery.QueryHash || !slices.Equal(names(got), names(first)) {
		t.Fatalf("recreated table, by query: columns %q", names(got))
	}

	pgtest.Exec(t, db, `CREATE TABLE t_child () INHERITS (t)`)
	if _, err := src.Discover(t.Context(), spec); !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "public.t_child") {
		t.Fatalf("after an inheritance child was added: err = %v, want ErrBadModel naming it", err)
	}
}

// TestDiscoverResolvesTypesOfQueries: a source_query's columns resolve
// as a table's do: domains, nested ones, over arrays and under arrays, to
// their base types. (A query's description already names a domain's base
// type, so only a table's columns keep the domain's qualified name.)
func TestDiscoverResolvesTypesOfQueries(t *testing.T) {
	src, _ := open(t,
		`CREATE DOMAIN money2 AS numeric(12,2)`,
		`CREATE DOMAIN positive_money AS money2 CHECK (VALUE > 0)`,
		`CREATE DOMAIN tagset AS text[]`,
		`CREATE TABLE items (id bigint PRIMARY KEY, m timestamptz, price positive_money, tags tagset, prices positive_money[])`)
	for _, spec := range []pgsource.Spec{
		{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "m"},
		{Query: "SELECT id, m, price, tags, prices FROM items", PrimaryKey: []string{"id"}, ModifiedAt: "m"},
	} {
		tab, err := src.Discover(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		price, _ := tab.Column("price")
		tags, _ := tab.Column("tags")
		prices, _ := tab.Column("prices")
		if spec.Table != "" && (price.TypeName != "public.positive_money" || tags.TypeName != "public.tagset" || prices.TypeName != "public.positive_money[]") {
			t.Errorf("type names %q, %q, %q: want the domains' qualified names", price.TypeName, tags.TypeName, prices.TypeName)
		}
		if price.TypeOID != pgtype.NumericOID || price.ElemOID != 0 {
			t.Errorf("%q: price %+v, want numeric", spec.Query, price)
		}
		if tags.TypeOID != pgtype.TextArrayOID || tags.ElemOID != pgtype.TextOID {
			t.Errorf("%q: tags %+v, want text[] of text", spec.Query, tags)
		}
		if prices.ElemOID != pgtype.NumericOID || prices.ElemTypType != 'b' {
			t.Errorf("%q: prices %+v, want an array of numeric elements", spec.Query, prices)
		}
	}
}

// TestSystemIDWithoutPgControlSystem: a role that may not call
// pg_control_system() still connects, and the server's address stands in
// for the system identifier; a role that may gets the identifier.
func TestSystemIDWithoutPgControlSystem(t *testing.T) {
	admin, db := open(t,
		`DO $$ BEGIN CREATE ROLE hw_noctl LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC`)
	if !regexp.MustCompile(`^[0-9]+$`).MatchString(admin.SystemID) {
		t.Fatalf("superuser: system id %q, want the cluster's identifier", admin.SystemID)
	}
	plain, err := pgsource.Connect(t.Context(), strings.Replace(db, "postgres@", "hw_noctl@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(t.Context())
	if !strings.Contains(plain.SystemID, ":") || plain.SystemID == admin.SystemID {
		t.Fatalf("role without pg_control_system(): system id %q, want host:port", plain.SystemID)
	}
	if plain.TimeZone == "" || plain.Database != admin.Database {
		t.Fatalf("role without pg_control_system(): time zone %q, database %q", plain.TimeZone, plain.Database)
	}
}
