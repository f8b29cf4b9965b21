package export_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// A source_query runs in a read-only session: whatever it calls, it cannot
// change the source, and the run fails instead of committing.
func TestSourceQueryCannotWrite(t *testing.T) {
	setup := []string{itemsTable,
		`INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 5) g`,
		`CREATE TABLE audit (id bigint)`,
		`CREATE SEQUENCE seq`,
		`CREATE FUNCTION zap(bigint) RETURNS bigint LANGUAGE sql VOLATILE AS 'DELETE FROM items WHERE id = $1 RETURNING id'`,
		`CREATE FUNCTION note(bigint) RETURNS bigint LANGUAGE plpgsql VOLATILE AS 'BEGIN INSERT INTO audit VALUES ($1); RETURN $1; END'`}
	for name, query := range map[string]string{
		"deleting function":  `SELECT *, zap(id) AS z FROM items`,
		"inserting function": `SELECT *, note(id) AS z FROM items`,
		"nextval":            `SELECT *, nextval('seq') AS z FROM items`,
		"data-modifying cte": `WITH d AS (DELETE FROM items RETURNING *) SELECT * FROM d`,
	} {
		t.Run(name, func(t *testing.T) {
			l := newLake(t, setup...)
			opts := l.options()
			opts.Source.Table = ""
			opts.Source.Query = query
			_, err := l.export(opts)
			if err == nil {
				t.Fatal("a writing source_query was run")
			}
			if name != "data-modifying cte" && !strings.Contains(err.Error(), "read-only transaction") {
				t.Fatalf("want a read-only error, got %v", err)
			}
			got := l.pgQuery(`SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM audit), (SELECT last_value || '/' || is_called FROM seq)`)
			if w := "[[5 0 1/false]]"; fmt.Sprint(got) != w {
				t.Fatalf("source changed: got %s, want %s", fmt.Sprint(got), w)
			}
			if st := l.state(); st.Seq != 0 {
				t.Fatalf("committed seq %d", st.Seq)
			}
		})
	}
}

// Every statement means the same whatever the role's search_path. Under a
// role whose path is empty, a citext tenant column used to compare as text
// (case-sensitively, matching nothing) and the run committed 0 rows. Types
// in a non-public schema take part too: a domain over text as key, a domain
// over citext as tenant column, an enum column.
func TestSearchPathOfTheRoleDoesNotMatter(t *testing.T) {
	l := newLake(t, `CREATE EXTENSION citext`,
		`CREATE SCHEMA s`,
		`CREATE TYPE s.state AS ENUM ('new', 'done')`,
		`CREATE DOMAIN s.code AS text`,
		`CREATE DOMAIN s.org AS citext`,
		`CREATE TABLE items (code s.code, id bigint, tenant citext, org s.org, state s.state, updated_at timestamptz,
			PRIMARY KEY (code, id))`,
		`INSERT INTO items SELECT c, g, t, t, 'new', '2026-01-01'::timestamptz + g * interval '1 second'
		 FROM unnest(ARRAY['Acme', 'other']) t, generate_series(1, 15) g, LATERAL (SELECT t || '-' || (g % 4)) k(c)`)
	l.exec(`CREATE ROLE reader LOGIN`,
		`ALTER ROLE reader SET search_path = ''`,
		`GRANT USAGE ON SCHEMA s TO reader`,
		`GRANT SELECT ON items TO reader`)
	t.Cleanup(func() { pgtest.Exec(t, l.db, `DROP OWNED BY reader CASCADE`) })
	u, err := url.Parse(l.db)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("reader")
	reader := u.String()

	for _, tc := range []struct {
		name, column, tenant, query string
		want                        int64
	}{
		{name: "all", want: 30},
		{name: "citext_tenant", column: "tenant", tenant: "ACME", want: 15},
		{name: "domain_tenant", column: "org", tenant: "acme", want: 15},
		{name: "query", query: `SELECT * FROM public.items`, want: 30},
		{name: "query_tenant", column: "tenant", tenant: "aCmE", query: `SELECT * FROM public.items`, want: 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lake{t: t, db: reader, dir: l.dir, model: tc.name}
			opts := l.options()
			opts.Source.PrimaryKey = []string{"code", "id"}
			opts.PageRows = 4
			if tc.column != "" {
				opts.Source.TenantColumn, opts.Source.Tenant = tc.column, &tc.tenant
			}
			if tc.query != "" {
				opts.Source.Table, opts.Source.Query = "", tc.query
			}
			res := l.mustExport(opts)
			if got := res.Commit.Metrics.RowsTransferred; got != tc.want {
				t.Fatalf("read %d rows, want %d", got, tc.want)
			}
			got := l.query(`SELECT count(*), count(DISTINCT (code, id)), count(*) FILTER (WHERE state = 'new') FROM lake`)
			if w := fmt.Sprintf("[[%d %[1]d %[1]d]]", tc.want); fmt.Sprint(got) != w {
				t.Fatalf("lake %v, want %s", got, w)
			}
		})
	}
}
