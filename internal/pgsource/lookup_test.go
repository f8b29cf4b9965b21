package pgsource_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

// TestLookupIgnoresShadowingFunctions: the table a model names is looked
// up under the role's search_path, which may hold, before pg_catalog, a
// schema with a function or an operator of a catalog's name that fits the
// lookup's arguments better than the catalog's own (format over text, an
// = over oid and regclass). The lookup must not call them: it finds the
// table, its relation name and its inheritance children all the same.
func TestLookupIgnoresShadowingFunctions(t *testing.T) {
	_, db := open(t,
		`CREATE SCHEMA shadow`,
		`CREATE FUNCTION shadow.format(text, text, text) RETURNS text LANGUAGE sql AS 'SELECT ''shadowed'''`,
		`CREATE FUNCTION shadow.to_regclass(text) RETURNS regclass LANGUAGE sql AS 'SELECT ''pg_class''::regclass'`,
		`CREATE FUNCTION shadow.eq(oid, regclass) RETURNS bool LANGUAGE sql AS 'SELECT true'`,
		`CREATE OPERATOR shadow.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = shadow.eq)`,
		`CREATE TABLE items (id bigint PRIMARY KEY, m timestamptz NOT NULL, note text)`,
		`CREATE TABLE parent (id bigint PRIMARY KEY, m timestamptz NOT NULL)`,
		`CREATE TABLE child () INHERITS (parent)`,
		`CREATE ROLE shadowed LOGIN`,
		`GRANT USAGE ON SCHEMA shadow TO shadowed`,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO shadowed`,
		`ALTER ROLE shadowed SET search_path = shadow, pg_catalog, public`)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("shadowed")
	for _, mode := range []string{"", "simple_protocol"} {
		dsn := u.String()
		if mode != "" {
			q := u.Query()
			q.Set("default_query_exec_mode", mode)
			v := *u
			v.RawQuery = q.Encode()
			dsn = v.String()
		}
		src, err := pgsource.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close(t.Context())
		tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "items", PrimaryKey: []string{"id"}, ModifiedAt: "m"})
		if err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
		var names []string
		for _, c := range tab.Columns {
			names = append(names, c.Name)
		}
		if want := []string{"id", "m", "note"}; tab.Relation != "public.items" || !slices.Equal(names, want) {
			t.Errorf("mode %q: found %s with columns %q, want public.items with %q", mode, tab.Relation, names, want)
		}
		_, err = src.Discover(t.Context(), pgsource.Spec{Table: "parent", PrimaryKey: []string{"id"}, ModifiedAt: "m"})
		if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "public.child") {
			t.Errorf("mode %q: parent with an inheritance child: err = %v, want a refusal naming public.child", mode, err)
		}
	}
}
