package pgsource_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestDiscoverBoundsDomainDepth: discovery resolves a column's type
// through at most 31 domains, its array element's too, and refuses
// deeper ones, as it always has: a table's column, an array's element and
// a source_query's array (whose columns come described with their
// domains resolved, but not their elements') each, at 31 and at 32
// domains.
func TestDiscoverBoundsDomainDepth(t *testing.T) {
	setup := []string{}
	prev := "int"
	for i := 1; i <= 32; i++ {
		setup = append(setup, fmt.Sprintf("CREATE DOMAIN d%d AS %s", i, prev))
		prev = fmt.Sprintf("d%d", i)
	}
	for _, n := range []int{31, 32} {
		setup = append(setup,
			fmt.Sprintf("CREATE TABLE t%d (id int PRIMARY KEY, m timestamptz, v d%d)", n, n),
			fmt.Sprintf("CREATE TABLE a%d (id int PRIMARY KEY, m timestamptz, v d%d[])", n, n))
	}
	src, _ := open(t, setup...)
	for _, n := range []int{31, 32} {
		specs := map[string]pgsource.Spec{
			"column":       {Table: fmt.Sprintf("t%d", n), PrimaryKey: []string{"id"}, ModifiedAt: "m"},
			"element":      {Table: fmt.Sprintf("a%d", n), PrimaryKey: []string{"id"}, ModifiedAt: "m"},
			"source_query": {Query: fmt.Sprintf("SELECT id, m, ARRAY[v] AS v FROM t%d", n), PrimaryKey: []string{"id"}, ModifiedAt: "m"},
		}
		for name, spec := range specs {
			tab, err := src.Discover(t.Context(), spec)
			if n == 32 {
				if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "domains nested too deep") {
					t.Errorf("%s under %d domains: err = %v, want a refusal", name, n, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s under %d domains: %v", name, n, err)
				continue
			}
			c, _ := tab.Column("v")
			if got := map[bool]uint32{true: c.ElemOID, false: c.TypeOID}[name != "column"]; got != pgtype.Int4OID {
				t.Errorf("%s under %d domains resolved to type %d, want integer", name, n, got)
			}
		}
	}
}
