package pgsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ErrBadModel: the model does not fit the source (unknown table or column,
// no unique key, an unusable modified-at type, a reserved column name).
var ErrBadModel = errors.New("invalid model")

// Spec says what to read.
type Spec struct {
	// Table is SCHEMA.TABLE in SQL syntax (quote parts that need it), or
	// empty when Query is set.
	Table string
	// Query is a custom source_query.
	Query        string
	PrimaryKey   []string
	ModifiedAt   string
	TenantColumn string
	Tenant       *string
	// SoftDelete names a column that marks a row deleted: true (a boolean)
	// or not NULL (any other type). Such a row is read as a tombstone.
	SoftDelete string
}

// Table is a discovered model.
type Table struct {
	Spec
	// Relation is the resolved, quoted relation, or "" for a query.
	Relation string
	// RelOID is the relation's pg_class OID, which a table dropped and
	// recreated, or restored from a dump, does not keep; 0 for a query.
	RelOID uint32
	// QueryHash identifies a source_query.
	QueryHash string
	Columns   []formats.Column
	ModKind   watermark.Kind
	modIdx    int
	keyIdx    []int
	tenantIdx int
	softIdx   int // meaningful when SoftDelete is set
	// Warnings found at discovery (e.g. no index on (modified_at, pk)).
	Warnings []string
}

// Column returns the discovered column named name.
func (t *Table) Column(name string) (formats.Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return formats.Column{}, false
}

// Discover reads the columns and types of the model's table or query and
// validates the key, modified-at and tenant columns.
func (s *Source) Discover(ctx context.Context, spec Spec) (*Table, error) {
	t := &Table{Spec: spec, tenantIdx: -1, softIdx: -1}
	var relOID uint32
	// The names the user wrote resolve as the role would resolve them;
	// everything else runs under a pinned path (searchpath.go).
	if err := s.setSearchPath(ctx, s.rolePath()); err != nil {
		return nil, err
	}
	if spec.Query != "" {
		sum := sha256.Sum256([]byte(spec.Query))
		t.QueryHash = hex.EncodeToString(sum[:])
		cols, err := s.queryColumns(ctx, spec.Query)
		if err != nil {
			return nil, err
		}
		t.Columns = cols
	} else {
		var relkind string
		var children []string
		err := s.conn.QueryRow(ctx, lookupSQL, s.oneShot(), spec.Table).Scan(&relOID, &t.Relation, &relkind, &children)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("table %s does not exist (or is not visible to this role): %w", spec.Table, ErrBadModel)
		}
		if err != nil {
			return nil, s.classify("look up table "+spec.Table, err)
		}
		if relkind == "v" || relkind == "f" {
			return nil, fmt.Errorf("%s is a view or foreign table, which has no unique index to page on: export it with a source_query instead: %w", spec.Table, ErrBadModel)
		}
		if relkind != "p" && len(children) > 0 {
			return nil, refuseInheritance(t.Relation, children)
		}
		t.RelOID = relOID
		if err := s.setSearchPath(ctx, catalogPath); err != nil {
			return nil, err
		}
		if t.Columns, err = s.tableColumns(ctx, relOID); err != nil {
			return nil, err
		}
	}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
		if strings.HasPrefix(strings.ToLower(c.Name), "_hw_") {
			return nil, fmt.Errorf("source column %q uses the reserved prefix _hw_: rename or leave it out with a source_query: %w", c.Name, ErrBadModel)
		}
	}
	find := func(role, name string) (int, error) {
		if i := slices.Index(names, name); i >= 0 {
			return i, nil
		}
		return -1, fmt.Errorf("%s column %q does not exist in %s; columns are: %s: %w",
			role, name, t.describe(), strings.Join(names, ", "), ErrBadModel)
	}
	if len(spec.PrimaryKey) == 0 {
		return nil, fmt.Errorf("no primary key columns given: %w", ErrBadModel)
	}
	var err error
	if t.modIdx, err = find("modified-at", spec.ModifiedAt); err != nil {
		return nil, err
	}
	for _, k := range spec.PrimaryKey {
		i, err := find("primary key", k)
		if err != nil {
			return nil, err
		}
		if slices.Contains(t.keyIdx, i) {
			return nil, fmt.Errorf("primary key column %q is named twice: %w", k, ErrBadModel)
		}
		if i == t.modIdx {
			return nil, fmt.Errorf("column %q cannot be both the modified-at column and part of the key: %w", k, ErrBadModel)
		}
		t.keyIdx = append(t.keyIdx, i)
	}
	if spec.TenantColumn != "" {
		if t.tenantIdx, err = find("tenant", spec.TenantColumn); err != nil {
			return nil, err
		}
		if spec.Tenant == nil {
			return nil, fmt.Errorf("a tenant column is set but no tenant value: %w", ErrBadModel)
		}
	} else if spec.Tenant != nil {
		return nil, fmt.Errorf("a tenant value is set but no tenant column: %w", ErrBadModel)
	}
	if spec.SoftDelete != "" {
		if t.softIdx, err = find("soft-delete", spec.SoftDelete); err != nil {
			return nil, err
		}
		if t.softIdx == t.modIdx || slices.Contains(t.keyIdx, t.softIdx) {
			return nil, fmt.Errorf("soft-delete column %q is the modified-at column or part of the key: name the column that marks a row deleted: %w", spec.SoftDelete, ErrBadModel)
		}
	}
	mod := t.Columns[t.modIdx]
	switch mod.TypeOID {
	case pgtype.TimestamptzOID:
		t.ModKind = watermark.Timestamptz
	case pgtype.TimestampOID:
		t.ModKind = watermark.Timestamp
	case pgtype.DateOID:
		t.ModKind = watermark.Date
	default:
		return nil, fmt.Errorf("modified-at column %q has type %s, which cannot order changes: use a timestamptz, timestamp or date column: %w", mod.Name, mod.TypeName, ErrBadModel)
	}
	if relOID != 0 {
		if err := s.checkIndexes(ctx, t, relOID); err != nil {
			return nil, err
		}
	}
	if err := s.pinSearchPath(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// pinSearchPath sets the path the model's statements run under: pg_catalog,
// (for a source_query) the role's schemas, then the schemas of the
// operators that compare its modified-at, key and tenant columns.
func (s *Source) pinSearchPath(ctx context.Context, t *Table) error {
	compared := []uint32{t.Columns[t.modIdx].TypeOID}
	for _, i := range t.keyIdx {
		compared = append(compared, t.Columns[i].TypeOID)
	}
	if t.tenantIdx >= 0 {
		compared = append(compared, t.Columns[t.tenantIdx].TypeOID)
	}
	ops, err := s.operatorSchemas(ctx, compared)
	if err != nil {
		return err
	}
	path := slices.Clone(catalogPath)
	if t.Query != "" {
		path = s.rolePath()
	}
	return s.setSearchPath(ctx, appendNew(path, ops...))
}

// lookupSQL finds a table named as the user wrote it (under the role's
// search_path), with its inheritance children, in one statement. It runs
// under that path, so every function and operator is qualified: a schema
// of the path may define one of the same name that fits the arguments
// better than pg_catalog's (a format over text, an = over oid and
// regclass), and would be chosen even though pg_catalog comes first.
const lookupSQL = `
	SELECT c.oid, pg_catalog.format('%I.%I', n.nspname, c.relname), c.relkind::pg_catalog.text,
	       array(SELECT pg_catalog.format('%I.%I', cn.nspname, cc.relname)
	             FROM pg_catalog.pg_inherits i
	             JOIN pg_catalog.pg_class cc ON cc.oid OPERATOR(pg_catalog.=) i.inhrelid
	             JOIN pg_catalog.pg_namespace cn ON cn.oid OPERATOR(pg_catalog.=) cc.relnamespace
	             WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid ORDER BY cn.nspname, cc.relname)::pg_catalog.text[]
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
	WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text)::pg_catalog.oid`

// refuseInheritance refuses a table with inheritance children. Reading it
// reads their rows too, but its unique index covers only its own rows: a
// child's row with a parent's key would be taken for another version of
// it, and dedupe would keep one of two distinct rows. Reading ONLY the
// table instead would silently leave out rows that a plain SELECT of it
// shows, so the choice is left to the user. A declarative partitioned
// table (relkind 'p') is not refused: its unique indexes cover every
// partition.
func refuseInheritance(relation string, children []string) error {
	named := strings.Join(children, ", ")
	if len(children) > 3 {
		named = fmt.Sprintf("%s and %d more", strings.Join(children[:3], ", "), len(children)-3)
	}
	return fmt.Errorf("%s has inheritance children (%s) whose rows a read of it includes but its unique index does not cover, so distinct rows would share a key: export only its own rows with --source-query 'SELECT * FROM ONLY %s', and each child as a model of its own: %w",
		relation, named, relation, ErrBadModel)
}

func (t *Table) describe() string {
	if t.Relation != "" {
		return t.Relation
	}
	return "the source_query"
}

// columnsSQL reads columns and resolves their types in one statement:
// domains are replaced by their base types (with the innermost domain's
// typmod, as a domain fixes its base's), and an array's element likewise,
// so that the mapping sees only base, enum, range and composite types.
// The walk resolves at most 31 domains nested in one another, as the
// statement per domain before it did: deeper is refused.
// Type names are read under search_path pg_catalog alone (the caller's
// duty), so that format_type qualifies every other schema's. %s is the
// input: the rows (i, name, notnull, oid, typmod) in the order of i.
const columnsSQL = `WITH RECURSIVE input AS (%s),
walk(i, oid, typmod, depth) AS (
	SELECT i, oid, typmod, 0 FROM input
	UNION ALL
	SELECT w.i, t.typbasetype, t.typtypmod, w.depth + 1
	FROM walk w JOIN pg_type t ON t.oid = w.oid
	WHERE t.typtype = 'd' AND w.depth < 31),
base AS (
	SELECT w.i, w.oid, w.typmod, t.typtype::text AS typtype, CASE WHEN t.typcategory = 'A' THEN nullif(t.typelem, 0) END AS elem
	FROM walk w JOIN pg_type t ON t.oid = w.oid
	WHERE t.typtype <> 'd'),
ewalk(i, oid, depth) AS (
	SELECT i, elem, 0 FROM base WHERE elem IS NOT NULL
	UNION ALL
	SELECT e.i, t.typbasetype, e.depth + 1
	FROM ewalk e JOIN pg_type t ON t.oid = e.oid
	WHERE t.typtype = 'd' AND e.depth < 31),
ebase AS (
	SELECT e.i, e.oid, t.typtype::text AS typtype
	FROM ewalk e JOIN pg_type t ON t.oid = e.oid
	WHERE t.typtype <> 'd')
SELECT input.name, input.oid, format_type(input.oid, input.typmod), input.notnull,
	base.oid, base.typmod, base.typtype, base.elem IS NOT NULL, ebase.oid, ebase.typtype
FROM input LEFT JOIN base USING (i) LEFT JOIN ebase USING (i)
ORDER BY input.i`

// tableColumnsInput lists the live columns of the relation $1.
const tableColumnsInput = `
	SELECT a.attnum::int8 AS i, a.attname::text AS name, a.attnotnull AS notnull, a.atttypid AS oid, a.atttypmod AS typmod
	FROM pg_attribute a
	WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped`

// queryColumnsInput lists the columns described by a Prepare: the types
// $1, typmods $2 and names $3.
const queryColumnsInput = `
	SELECT u.i, u.name, false AS notnull, u.oid, u.typmod
	FROM unnest($1::oid[], $2::int4[], $3::text[]) WITH ORDINALITY AS u(oid, typmod, name, i)`

func (s *Source) tableColumns(ctx context.Context, rel uint32) ([]formats.Column, error) {
	return s.columns(ctx, fmt.Sprintf(columnsSQL, tableColumnsInput), rel)
}

// columns runs columnsSQL (with its input) and checks what it resolved.
func (s *Source) columns(ctx context.Context, sql string, args ...any) ([]formats.Column, error) {
	rows, err := s.conn.Query(ctx, sql, append([]any{s.oneShot()}, args...)...)
	if err != nil {
		return nil, s.classify("read columns", err)
	}
	var cols []formats.Column
	for rows.Next() {
		var c formats.Column
		var declared uint32
		var base, elem *uint32
		var typmod *int32
		var typtype, elemTyptype *string
		var isArray *bool
		if err := rows.Scan(&c.Name, &declared, &c.TypeName, &c.NotNull, &base, &typmod, &typtype, &isArray, &elem, &elemTyptype); err != nil {
			rows.Close()
			return nil, s.classify("read columns", err)
		}
		if base == nil || (*isArray && elem == nil) {
			rows.Close()
			return nil, fmt.Errorf("type %d of column %q: domains nested too deep, or the type is gone: %w", declared, c.Name, ErrBadModel)
		}
		c.TypeOID, c.Typmod, c.TypType = *base, *typmod, (*typtype)[0]
		if elem != nil {
			c.ElemOID, c.ElemTypType = *elem, (*elemTyptype)[0]
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read columns", err)
	}
	return cols, nil
}

// queryColumns describes a custom query without running it.
func (s *Source) queryColumns(ctx context.Context, query string) ([]formats.Column, error) {
	sd, err := s.conn.PgConn().Prepare(ctx, "", wrapQuery(query)+" SELECT * FROM q LIMIT 0", nil)
	if err != nil {
		return nil, fmt.Errorf("describe source_query: %w: %w", err, ErrBadModel)
	}
	oids := make([]uint32, len(sd.Fields))
	typmods := make([]int32, len(sd.Fields))
	names := make([]string, len(sd.Fields))
	seen := map[string]bool{}
	for i, f := range sd.Fields {
		if seen[f.Name] {
			return nil, fmt.Errorf("source_query returns two columns named %q: alias them apart: %w", f.Name, ErrBadModel)
		}
		seen[f.Name] = true
		oids[i], typmods[i], names[i] = f.DataTypeOID, f.TypeModifier, f.Name
	}
	// Type names are read under pg_catalog alone, so that they come back
	// qualified.
	if err := s.setSearchPath(ctx, catalogPath); err != nil {
		return nil, err
	}
	cols, err := s.columns(ctx, fmt.Sprintf(columnsSQL, queryColumnsInput), oids, typmods, names)
	if err != nil {
		return nil, fmt.Errorf("describe source_query: %w", err)
	}
	return cols, nil
}

func wrapQuery(query string) string {
	return "WITH q AS (\n" + strings.TrimRight(strings.TrimSpace(query), ";") + "\n)"
}

// checkIndexes requires a unique index on (a subset of) the key, since
// keyset paging skips rows when (modified_at, pk) is not unique, and warns
// when no index leads with the modified-at column.
func (s *Source) checkIndexes(ctx context.Context, t *Table, rel uint32) error {
	rows, err := s.conn.Query(ctx, `
		SELECT i.indisunique,
		       array(SELECT a.attname FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
		             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		             ORDER BY k.ord)::text[],
		       i.indnkeyatts
		FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
		WHERE i.indrelid = $1 AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
		  AND am.amname = 'btree'`, s.oneShot(), rel)
	if err != nil {
		return s.classify("read indexes", err)
	}
	defer rows.Close()
	// Pages read one tenant at a time: its index leads with the tenant.
	lead := []string{t.ModifiedAt}
	if t.TenantColumn != "" {
		lead = []string{t.TenantColumn, t.ModifiedAt}
	}
	unique, ordered := false, false
	for rows.Next() {
		var isUnique bool
		var cols []string
		var nkey int
		if err := rows.Scan(&isUnique, &cols, &nkey); err != nil {
			return s.classify("read indexes", err)
		}
		if nkey < len(cols) {
			cols = cols[:nkey] // INCLUDE columns do not take part in uniqueness
		}
		if isUnique && len(cols) > 0 && subset(cols, t.PrimaryKey) {
			unique = true
		}
		if slices.Equal(cols[:min(len(cols), len(lead))], lead) {
			ordered = true
		}
	}
	if err := rows.Err(); err != nil {
		return s.classify("read indexes", err)
	}
	if !unique {
		return fmt.Errorf("%s has no unique constraint or index on its key (%s): keyset paging needs one, or rows are skipped: %w",
			t.Relation, strings.Join(t.PrimaryKey, ", "), ErrBadModel)
	}
	if !ordered {
		var cols []string
		for _, c := range append(slices.Clone(lead), t.PrimaryKey...) {
			if q := quoteIdent(c); !slices.Contains(cols, q) {
				cols = append(cols, q)
			}
		}
		leads := fmt.Sprintf("%q", t.ModifiedAt)
		if t.TenantColumn != "" {
			leads = fmt.Sprintf("(%q, %q)", t.TenantColumn, t.ModifiedAt)
		}
		t.Warnings = append(t.Warnings, fmt.Sprintf(
			"no index on %s leads with %s: every page scans the table; create one on (%s)",
			t.Relation, leads, strings.Join(cols, ", ")))
	}
	return nil
}

func subset(cols, of []string) bool {
	for _, c := range cols {
		if !slices.Contains(of, c) {
			return false
		}
	}
	return true
}
