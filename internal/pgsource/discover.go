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
		err := s.conn.QueryRow(ctx, `
			SELECT c.oid, format('%I.%I', n.nspname, c.relname), c.relkind::text
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.oid = to_regclass($1)`, spec.Table).Scan(&relOID, &t.Relation, &relkind)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("table %s does not exist (or is not visible to this role): %w", spec.Table, ErrBadModel)
		}
		if err != nil {
			return nil, s.classify("look up table "+spec.Table, err)
		}
		if relkind == "v" || relkind == "f" {
			return nil, fmt.Errorf("%s is a view or foreign table, which has no unique index to page on: export it with a source_query instead: %w", spec.Table, ErrBadModel)
		}
		if relkind != "p" {
			if err := s.refuseInheritance(ctx, t.Relation, relOID); err != nil {
				return nil, err
			}
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

// refuseInheritance refuses a table with inheritance children. Reading it
// reads their rows too, but its unique index covers only its own rows: a
// child's row with a parent's key would be taken for another version of
// it, and dedupe would keep one of two distinct rows. Reading ONLY the
// table instead would silently leave out rows that a plain SELECT of it
// shows, so the choice is left to the user. A declarative partitioned
// table (relkind 'p') is not refused: its unique indexes cover every
// partition.
func (s *Source) refuseInheritance(ctx context.Context, relation string, rel uint32) error {
	var children []string
	err := s.conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(format('%I.%I', n.nspname, c.relname) ORDER BY n.nspname, c.relname), '{}')
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.inhparent = $1`, rel).Scan(&children)
	if err != nil {
		return s.classify("read inheritance children of "+relation, err)
	}
	if len(children) == 0 {
		return nil
	}
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

func (s *Source) tableColumns(ctx context.Context, rel uint32) ([]formats.Column, error) {
	rows, err := s.conn.Query(ctx, `
		SELECT a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod), a.attnotnull
		FROM pg_attribute a
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, rel)
	if err != nil {
		return nil, s.classify("read columns", err)
	}
	var cols []formats.Column
	for rows.Next() {
		var c formats.Column
		if err := rows.Scan(&c.Name, &c.TypeOID, &c.Typmod, &c.TypeName, &c.NotNull); err != nil {
			return nil, s.classify("read columns", err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("read columns", err)
	}
	for i := range cols {
		if err := s.resolveType(ctx, &cols[i]); err != nil {
			return nil, err
		}
	}
	return cols, nil
}

// queryColumns describes a custom query without running it.
func (s *Source) queryColumns(ctx context.Context, query string) ([]formats.Column, error) {
	sd, err := s.conn.PgConn().Prepare(ctx, "", wrapQuery(query)+" SELECT * FROM q LIMIT 0", nil)
	if err != nil {
		return nil, fmt.Errorf("describe source_query: %w: %w", err, ErrBadModel)
	}
	// Type names are read under pg_catalog alone, so that they come back
	// qualified.
	if err := s.setSearchPath(ctx, catalogPath); err != nil {
		return nil, err
	}
	var cols []formats.Column
	seen := map[string]bool{}
	for _, f := range sd.Fields {
		if seen[f.Name] {
			return nil, fmt.Errorf("source_query returns two columns named %q: alias them apart: %w", f.Name, ErrBadModel)
		}
		seen[f.Name] = true
		c := formats.Column{Name: f.Name, TypeOID: f.DataTypeOID, Typmod: f.TypeModifier}
		if err := s.conn.QueryRow(ctx, "SELECT format_type($1, $2)", c.TypeOID, c.Typmod).Scan(&c.TypeName); err != nil {
			return nil, s.classify("describe source_query", err)
		}
		if err := s.resolveType(ctx, &c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, nil
}

func wrapQuery(query string) string {
	return "WITH q AS (\n" + strings.TrimRight(strings.TrimSpace(query), ";") + "\n)"
}

// resolveType replaces domains by their base type and finds array
// elements, so that the mapping sees only base, enum, range and composite
// types.
func (s *Source) resolveType(ctx context.Context, c *formats.Column) error {
	oid, typmod, typtype, err := s.baseType(ctx, c.TypeOID, c.Typmod)
	if err != nil {
		return err
	}
	c.TypeOID, c.Typmod, c.TypType = oid, typmod, typtype
	var elem uint32
	var category string
	if err := s.conn.QueryRow(ctx, "SELECT typelem, typcategory::text FROM pg_type WHERE oid = $1", oid).Scan(&elem, &category); err != nil {
		return s.classify("read type of "+c.Name, err)
	}
	if category == "A" && elem != 0 {
		eoid, _, etyp, err := s.baseType(ctx, elem, -1)
		if err != nil {
			return err
		}
		c.ElemOID, c.ElemTypType = eoid, etyp
	}
	return nil
}

func (s *Source) baseType(ctx context.Context, oid uint32, typmod int32) (uint32, int32, byte, error) {
	for range 32 {
		var typtype string
		var base uint32
		var basemod int32
		err := s.conn.QueryRow(ctx, "SELECT typtype::text, typbasetype, typtypmod FROM pg_type WHERE oid = $1", oid).Scan(&typtype, &base, &basemod)
		if err != nil {
			return 0, 0, 0, s.classify(fmt.Sprintf("read type %d", oid), err)
		}
		if typtype != "d" {
			return oid, typmod, typtype[0], nil
		}
		oid, typmod = base, basemod
	}
	return 0, 0, 0, fmt.Errorf("type %d: domains nested too deep: %w", oid, ErrBadModel)
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
		  AND am.amname = 'btree'`, rel)
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
