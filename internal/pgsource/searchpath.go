package pgsource

import (
	"context"
	"fmt"
	"slices"
)

// The meaning of a statement depends on search_path: a type name in a cast,
// a function, and above all an operator, which is looked up by name in the
// schemas of the path. Under a role whose search_path leaves out the schema
// of citext, `tenant = CAST($1::text AS public.citext)` finds no citext =
// operator and falls back to text = text through the implicit cast: it
// compares case-sensitively and matches other rows than citext's ORDER BY
// sorts by, so keyset pages skip rows. So the session never runs under the
// role's path:
//
//   - Type names are read with search_path = pg_catalog alone, so that
//     format_type qualifies every type outside pg_catalog ("public.citext",
//     "s.state"); a qualified name means the same under any path.
//   - The generated statements run with pg_catalog first, then the schemas
//     that hold the btree operators of the compared columns' types (the
//     default operator class, which ORDER BY sorts by). A source_query's own
//     names are resolved as the role would resolve them, so its path also
//     holds the role's schemas, before those of the operators.
//   - A table named without a schema is found through the role's path.

// catalogPath is the path under which type names are read.
var catalogPath = []string{"pg_catalog"}

// setSearchPath pins the session's search_path to schemas, in order.
func (s *Source) setSearchPath(ctx context.Context, schemas []string) error {
	if _, err := s.conn.Exec(ctx, "SELECT pg_catalog.set_config('search_path', $1, false)", s.oneShot(), quotePath(schemas)); err != nil {
		return s.classify("set the source session's search_path", err)
	}
	return nil
}

// rolePath is the path under which names the user wrote are resolved:
// pg_catalog first, then the role's own schemas.
func (s *Source) rolePath() []string {
	return appendNew(slices.Clone(catalogPath), s.roleSchemas...)
}

// operatorSchemas returns the schemas outside pg_catalog that hold the
// btree comparison operators of the given (base) types' default operator
// classes. A schema the role may not use is an error: its operators would
// be skipped silently, and another one chosen.
func (s *Source) operatorSchemas(ctx context.Context, types []uint32) ([]string, error) {
	rows, err := s.conn.Query(ctx, `
		SELECT DISTINCT n.nspname, has_schema_privilege(n.oid, 'USAGE')
		FROM pg_opclass oc
		JOIN pg_am am ON am.oid = oc.opcmethod
		JOIN pg_amop ao ON ao.amopfamily = oc.opcfamily
		JOIN pg_operator o ON o.oid = ao.amopopr
		JOIN pg_namespace n ON n.oid = o.oprnamespace
		WHERE am.amname = 'btree' AND oc.opcdefault AND oc.opcintype = ANY($1::oid[]) AND n.nspname <> 'pg_catalog'
		ORDER BY 1`, s.oneShot(), types)
	if err != nil {
		return nil, s.classify("read the operators of the key types", err)
	}
	defer rows.Close()
	var schemas []string
	for rows.Next() {
		var name string
		var usable bool
		if err := rows.Scan(&name, &usable); err != nil {
			return nil, s.classify("read the operators of the key types", err)
		}
		if !usable {
			return nil, fmt.Errorf("the comparison operators of a key, modified-at or tenant column live in schema %q, which this role may not use: grant it USAGE on that schema: %w", name, ErrBadModel)
		}
		schemas = append(schemas, name)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read the operators of the key types", err)
	}
	return schemas, nil
}

// appendNew appends the names not already in path.
func appendNew(path []string, names ...string) []string {
	for _, n := range names {
		if !slices.Contains(path, n) {
			path = append(path, n)
		}
	}
	return path
}
