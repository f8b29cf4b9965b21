package pgsource_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
)

// planNode is one node of EXPLAIN (VERBOSE, FORMAT JSON).
type planNode struct {
	NodeType string     `json:"Node Type"`
	Parent   string     `json:"Parent Relationship"`
	Output   []string   `json:"Output"`
	Plans    []planNode `json:"Plans"`
}

// TestCursorIsConvertedOncePerPage reads the server's plan of pages after
// a cursor, in both phases, on a key whose types have a stable input
// function (timestamptz reads TimeZone): the row flagged as the cursor's
// is found by comparing with the cursor's values, and no expression the
// scan evaluates for each row may run an input function on the cursor's
// text again (a "::cstring" call in its output). That parse was half the
// server's work on narrow rows.
func TestCursorIsConvertedOncePerPage(t *testing.T) {
	src, db := open(t,
		`CREATE TABLE items (id bigint, at timestamptz, updated_at timestamptz, note text, PRIMARY KEY (id, at))`,
		`CREATE INDEX ON items (updated_at, id, at)`,
		`INSERT INTO items SELECT g, '2024-01-01'::timestamptz + g * interval '1 s', CASE WHEN g % 2 = 0 THEN now() END, 'n' FROM generate_series(1, 100) g`,
		`ANALYZE items`)
	tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id", "at"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	sc := src.NewScanner(tab, tab.Quoted())
	conn := connect(t, db)
	mod := "2024-01-01 00:00:00+00"
	key := []string{"41", "2024-01-01 00:00:41+00"}
	for _, tc := range []struct {
		name      string
		after     *watermark.Cursor
		nullPhase bool
	}{
		{"after a cursor", &watermark.Cursor{ModifiedAt: &mod, Key: key}, false},
		{"NULL phase after a cursor", &watermark.Cursor{Key: key}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args := sc.PageSQL(watermark.Interval{To: "2100-01-01 00:00:00+00", IncludeNull: true}, tc.after, tc.nullPhase, 50)
			var out string
			if err := conn.QueryRow(t.Context(), "EXPLAIN (VERBOSE, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
				t.Fatalf("explain: %v\n%s", err, sql)
			}
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
				t.Fatalf("read plan: %v\n%s", err, out)
			}
			var perRow []string
			var walk func(n planNode)
			walk = func(n planNode) {
				if n.Parent == "InitPlan" {
					return // evaluated once per page
				}
				perRow = append(perRow, n.Output...)
				for _, c := range n.Plans {
					walk(c)
				}
			}
			walk(plans[0].Plan)
			if len(perRow) == 0 {
				t.Fatalf("the plan names no output:\n%s", out)
			}
			for _, o := range perRow {
				if strings.Contains(o, "::cstring") {
					t.Errorf("a per-row expression converts the cursor's text: %s\nin\n%s", o, sql)
				}
			}
		})
	}
}
