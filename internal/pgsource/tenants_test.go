package pgsource_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestDiscoverWarnsWithoutTenantIndex: a tenant model reads one tenant a
// page, so an index on (modified_at, key) does not serve it: only one
// leading with (tenant, modified_at) does. The warning names the index to
// create, the tenant not repeated when it is part of the key.
func TestDiscoverWarnsWithoutTenantIndex(t *testing.T) {
	src, db := open(t, `CREATE TABLE t (org text, id bigint, m timestamptz, PRIMARY KEY (org, id))`,
		`CREATE INDEX ON t (m, org, id)`, `CREATE INDEX ON t (org)`)
	acme := "acme"
	spec := pgsource.Spec{Table: "t", PrimaryKey: []string{"org", "id"}, ModifiedAt: "m", TenantColumn: "org", Tenant: &acme}
	tab, err := src.Discover(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Warnings) != 1 || !strings.Contains(tab.Warnings[0], `leads with ("org", "m")`) || !strings.Contains(tab.Warnings[0], `create one on ("org", "m", "id")`) {
		t.Fatalf("warnings %q, want one naming the index (org, m, id)", tab.Warnings)
	}
	pgtest.Exec(t, db, `CREATE INDEX ON t (org, m, id)`)
	if tab, err = src.Discover(t.Context(), spec); err != nil || len(tab.Warnings) != 0 {
		t.Fatalf("with the index: warnings %q, err %v", tab.Warnings, err)
	}
}

// TestTenantsQuery reads a tenant list: distinct values in order, NULLs
// counted apart, hostile values intact; one text column or a clear error;
// and the query cannot write.
func TestTenantsQuery(t *testing.T) {
	src, _ := open(t, `CREATE TABLE orgs (n int, name text, slug varchar(20))`,
		`INSERT INTO orgs VALUES (1, 'b', 'x'), (2, '', 'y'), (3, NULL, 'z'), (4, 'a/b c', 'w'), (5, 'b', 'v'), (6, 'ünï', 'u')`)
	got, nulls, err := src.Tenants(t.Context(), `SELECT name FROM orgs ORDER BY n`)
	if err != nil || nulls != 1 || !slices.Equal(got, []string{"b", "", "a/b c", "ünï"}) {
		t.Fatalf("tenants %q, %d NULLs, %v", got, nulls, err)
	}
	if got, _, err := src.Tenants(t.Context(), `SELECT slug FROM orgs ORDER BY n LIMIT 1`); err != nil || !slices.Equal(got, []string{"x"}) {
		t.Fatalf("varchar tenants %q, %v", got, err)
	}
	if got, _, err := src.Tenants(t.Context(), `SELECT n::text FROM orgs WHERE n = 3`); err != nil || !slices.Equal(got, []string{"3"}) {
		t.Fatalf("cast tenants %q, %v", got, err)
	}
	for _, tc := range []struct{ query, want string }{
		{`SELECT n FROM orgs`, "not text: cast it"},
		{`SELECT name, slug FROM orgs`, "2 columns, not one"},
		{`SELECT nope FROM orgs`, "nope"},
		{`WITH d AS (DELETE FROM orgs RETURNING name) SELECT name FROM d`, "read-only"},
	} {
		_, _, err := src.Tenants(t.Context(), tc.query)
		if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want ErrBadModel containing %q, got %v", tc.query, tc.want, err)
		}
	}
	if got, _, err := src.Tenants(t.Context(), `SELECT name FROM orgs WHERE name IS NOT NULL`); err != nil || len(got) != 4 {
		t.Fatalf("after the refused DELETE: %q %v", got, err)
	}
}
