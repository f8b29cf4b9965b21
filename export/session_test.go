package export_test

import (
	"fmt"
	"strings"
	"testing"
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
