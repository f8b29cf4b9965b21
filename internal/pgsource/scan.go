package pgsource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var pgxBinary = pgx.QueryResultFormats{pgx.BinaryFormatCode}

// ErrDuplicateKey: two rows share (modified_at, pk), so keyset paging
// could skip one of them.
var ErrDuplicateKey = errors.New("duplicate (modified_at, primary key)")

// ErrNullKey: a key column holds NULL.
var ErrNullKey = errors.New("NULL in a primary key column")

// Row is one source row during a scan. Its values are only valid inside
// the callback.
type Row struct {
	// Values are the wire values of the selected columns, in the order of
	// Table.Columns and in the form the select expressions give them; nil
	// is NULL.
	Values [][]byte
	// Mod is the modified-at value; ModNull when it is NULL.
	Mod     watermark.Value
	ModNull bool
	// Deleted: the model's soft-delete column marks the row deleted, so it
	// is written as a tombstone.
	Deleted bool
	// keyTexts are the ::text copies of the key columns that are not read
	// from Values, in the order of scan.keyCopy.
	keyTexts [][]byte
	scan     *scan
}

// Cursor returns the row's position in (modified_at, pk) order.
func (r *Row) Cursor() (*watermark.Cursor, error) {
	return r.scan.cursorOf(r)
}

type scan struct {
	src   *Source
	t     *Table
	exprs []string // the mapping's, one per column, then the key copies
	// keyCopy holds, per key column, the index in Row.keyTexts of its
	// ::text copy, or -1 when its value in Row.Values is binary and
	// keyText reads it.
	keyCopy []int
	ncols   int
	// ncopies counts the key copies; the soft-delete flag, when the model
	// has one, is the last expression after them.
	ncopies int
}

// Scanner pages through a table.
type Scanner struct {
	scan
	PageSize
	// Pages counts the statements run.
	Pages int64
	// Warn receives notices found while scanning (e.g. a query whose
	// predicates are not pushed down); called at most once per kind.
	Warn func(string)
	// AfterPage, when set, runs after each page (a test hook).
	AfterPage func()
	explained bool
	// modCol is the position in Row.Values of the modified-at column when
	// its select expression is the bare column, whose binary value is the
	// one modFromBinary reads: the page then selects it once, and the
	// cursor is read from the data column. Otherwise -1, and the page
	// selects the bare column a second time, first.
	modCol int
	// exactTwins: the modified-at and every key column are of types whose
	// values are equal only when their binary forms are, and their bytes
	// are what Row carries (binaryEqual). The rows of a page at its cursor
	// can then be told by the client, when the cursor is the last row it
	// remembered, without a flag computed by the server for every row.
	exactTwins bool
	// last keeps the key values of the newest row passed to fn, since the
	// row's own values are gone when the scan returns.
	last     Row
	haveLast bool
}

// LastCursor is the cursor of the last row the scan passed on, or nil.
func (sc *Scanner) LastCursor() (*watermark.Cursor, error) {
	if !sc.haveLast {
		return nil, nil
	}
	return sc.cursorOf(&sc.last)
}

// keep copies src into dst's buffer. An empty value stays non-nil: nil is
// NULL, and the empty string is a value.
func keep(dst *[]byte, src []byte) {
	if src == nil {
		*dst = nil
		return
	}
	if *dst == nil {
		*dst = make([]byte, 0, len(src))
	}
	*dst = append((*dst)[:0], src...)
}

func (sc *Scanner) remember(row *Row) {
	if sc.last.scan == nil {
		sc.last = Row{Values: make([][]byte, len(row.Values)), keyTexts: make([][]byte, len(row.keyTexts)), scan: &sc.scan}
	}
	for j, i := range sc.t.keyIdx {
		if x := sc.keyCopy[j]; x >= 0 {
			keep(&sc.last.keyTexts[x], row.keyTexts[x])
		} else {
			keep(&sc.last.Values[i], row.Values[i])
		}
	}
	sc.last.Mod, sc.last.ModNull = row.Mod, row.ModNull
	sc.haveLast = true
}

// sameAsLast reports whether row has the (modified_at, key) of the last
// row remembered.
func (sc *Scanner) sameAsLast(row *Row) bool {
	if !sc.haveLast || row.ModNull != sc.last.ModNull || (!row.ModNull && row.Mod != sc.last.Mod) {
		return false
	}
	for j := range sc.t.keyIdx {
		if !bytes.Equal(sc.keyRaw(row, j), sc.keyRaw(&sc.last, j)) {
			return false
		}
	}
	return true
}

// NewScanner prepares to read t with the mapping's select expressions,
// one per column of t.
//
// A key column whose select expression is the bare column and whose binary
// form keyText reads is taken from the row as it is. Every other key column
// is selected a second time as ::text, whatever the mapping makes of it
// (the mapping may select a text form, as it does for an unconstrained
// numeric): the cursor must be a literal that the column's type reads back
// as the same value.
func (s *Source) NewScanner(t *Table, selectExprs []string) *Scanner {
	sc := &Scanner{scan: scan{src: s, t: t, exprs: slices.Clone(selectExprs), ncols: len(selectExprs)}, PageSize: PageSize{PageRows: 50_000, FirstPageRows: 50_000}, modCol: -1}
	if mod := t.Columns[t.modIdx]; selectExprs[t.modIdx] == "t."+quoteIdent(mod.Name) {
		sc.modCol = t.modIdx
	}
	sc.exactTwins = sc.modCol >= 0
	copies := 0
	for _, i := range t.keyIdx {
		c := t.Columns[i]
		ref := "t." + quoteIdent(c.Name)
		if isFastKey(c.TypeOID) && selectExprs[i] == ref {
			sc.keyCopy = append(sc.keyCopy, -1)
			sc.exactTwins = sc.exactTwins && binaryEqual(c.TypeOID)
			continue
		}
		sc.keyCopy = append(sc.keyCopy, copies)
		sc.exprs = append(sc.exprs, ref+"::text")
		sc.exactTwins = false
		copies++
	}
	sc.ncopies = copies
	if t.SoftDelete != "" {
		sc.exprs = append(sc.exprs, t.softDeletedExpr())
	}
	return sc
}

// softDeletedExpr is true when the soft-delete column marks the row of t
// deleted: a boolean that is true, or any other type that is not NULL.
func (t *Table) softDeletedExpr() string {
	c := t.Columns[t.softIdx]
	ref := "t." + quoteIdent(c.Name)
	if c.TypeOID == pgtype.BoolOID {
		return "coalesce(" + ref + ", false)"
	}
	return "(" + ref + " IS NOT NULL)"
}

// binaryEqual reports whether two values of the type are equal, by its
// equality operator, exactly when their binary forms are the same bytes.
// Not numeric (1.0 = 1.00), the character types (bpchar ignores trailing
// blanks, and a nondeterministic collation equates other strings), nor a
// domain or an extension type, whose equality may be anything.
func binaryEqual(oid uint32) bool {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.BoolOID, pgtype.UUIDOID,
		pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID:
		return true
	}
	return false
}

func isFastKey(oid uint32) bool {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.BoolOID, pgtype.UUIDOID,
		pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID, pgtype.NumericOID:
		return true
	}
	return false
}

// Quoted returns the quoted identifiers of the table's columns, as the
// mapping's SelectExprs expects them (qualified by the alias t).
func (t *Table) Quoted() []string {
	q := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		q[i] = "t." + quoteIdent(c.Name)
	}
	return q
}

// keyRaw is the value of the j-th key column that its cursor literal is
// made from: its ::text copy, or its binary value.
func (s *scan) keyRaw(r *Row, j int) []byte {
	if x := s.keyCopy[j]; x >= 0 {
		return r.keyTexts[x]
	}
	return r.Values[s.t.keyIdx[j]]
}

func (s *scan) cursorOf(r *Row) (*watermark.Cursor, error) {
	c := &watermark.Cursor{Key: make([]string, len(s.t.keyIdx))}
	if !r.ModNull {
		m := watermark.Format(s.t.ModKind, r.Mod)
		c.ModifiedAt = &m
	}
	for j, i := range s.t.keyIdx {
		raw := s.keyRaw(r, j)
		if raw == nil {
			return nil, fmt.Errorf("%w %q", ErrNullKey, s.t.Columns[i].Name)
		}
		if s.keyCopy[j] >= 0 {
			c.Key[j] = string(raw)
			continue
		}
		txt, err := keyText(s.t.Columns[i].TypeOID, raw)
		if err != nil {
			return nil, fmt.Errorf("read key column %q: %w", s.t.Columns[i].Name, err)
		}
		c.Key[j] = txt
	}
	return c, nil
}

// from returns the FROM clause, aliasing the relation or query as t.
func (s *scan) from() string {
	if s.t.Query != "" {
		return "q AS t"
	}
	return s.t.Relation + " AS t"
}

func (s *scan) with() string {
	if s.t.Query != "" {
		return wrapQuery(s.t.Query) + "\n"
	}
	return ""
}

// cast binds a value as text and converts it with the column's type input
// function, so that any type (enums and domains included) is bound exactly.
func cast(param int, typeName string) string {
	return fmt.Sprintf("CAST($%d::text AS %s)", param, typeName)
}

// once makes the server evaluate a cursor value a single time per page
// rather than per row: an uncorrelated sub-select is an InitPlan. The input
// functions of most types are only stable (timestamptz's reads TimeZone),
// so a cast of a parameter is not folded into a constant, and in the
// select list it parsed the cursor's text again for every row: half the
// server's work on a page of narrow rows. The index condition is evaluated
// once per scan and keeps the plain cast.
func once(expr string) string { return "(SELECT " + expr + ")" }

type sqlBuilder struct {
	where []string
	args  []any
}

func (b *sqlBuilder) arg(v any) int {
	b.args = append(b.args, v)
	return len(b.args)
}

func (s *scan) tenantPredicate(b *sqlBuilder) {
	if s.t.TenantColumn == "" {
		return
	}
	col := s.t.Columns[s.t.tenantIdx]
	b.where = append(b.where, fmt.Sprintf("t.%s = %s", quoteIdent(col.Name), cast(b.arg(*s.t.Tenant), col.TypeName)))
}

// pageLayout says where a page's columns are: raw[mod] is the modified-at
// value, raw[at] (when at >= 0) whether the row is at the page's cursor,
// and the select expressions start at raw[values].
type pageLayout struct{ mod, at, values int }

// pageSQL builds one keyset page. after is the cursor to start at
// (inclusive: the row at the cursor is returned again and skipped, so that
// a duplicate of it is seen); nullPhase reads the rows whose modified-at is
// NULL, ordered by key. clientTwins says that the caller tells the rows at
// the cursor itself (see Scanner.exactTwins), so the page needs no flag
// for them.
func (sc *Scanner) pageSQL(rng watermark.Interval, after *watermark.Cursor, nullPhase bool, limit int, clientTwins bool) (string, []any, pageLayout) {
	s := &sc.scan
	var b sqlBuilder
	mod := s.t.Columns[s.t.modIdx]
	modRef := "t." + quoteIdent(mod.Name)
	var keyRefs, keyParams, keyOnce []string
	for j, i := range s.t.keyIdx {
		c := s.t.Columns[i]
		keyRefs = append(keyRefs, "t."+quoteIdent(c.Name))
		if after != nil {
			p := cast(b.arg(after.Key[j]), c.TypeName)
			keyParams = append(keyParams, p)
			keyOnce = append(keyOnce, once(p))
		}
	}
	// atCursor tells, by the types' own equality, which rows are at the
	// cursor: a row whose key differs in bytes from the cursor's but equals
	// it (numeric 1.0 and 1.00, citext 'a' and 'A') is a twin of the cursor
	// row, not the next row. It is in the select list, evaluated for every
	// row, so it compares with the cursor's values converted once (see once).
	atCursor := "false"
	if nullPhase {
		b.where = append(b.where, modRef+" IS NULL")
		if after != nil {
			lhs, rhs := "("+strings.Join(keyRefs, ", ")+")", "("+strings.Join(keyParams, ", ")+")"
			b.where = append(b.where, lhs+" >= "+rhs)
			atCursor = lhs + " = (" + strings.Join(keyOnce, ", ") + ")"
		}
	} else {
		switch {
		case after != nil:
			lhs := fmt.Sprintf("(%s, %s)", modRef, strings.Join(keyRefs, ", "))
			modParam := cast(b.arg(*after.ModifiedAt), mod.TypeName)
			rhs := fmt.Sprintf("(%s, %s)", modParam, strings.Join(keyParams, ", "))
			b.where = append(b.where, lhs+" >= "+rhs)
			atCursor = fmt.Sprintf("%s = (%s, %s)", lhs, once(modParam), strings.Join(keyOnce, ", "))
		case rng.From != nil:
			b.where = append(b.where, fmt.Sprintf("%s >= %s", modRef, cast(b.arg(*rng.From), mod.TypeName)))
		}
		switch {
		case !rng.IncludeBeyondTo:
			b.where = append(b.where, fmt.Sprintf("%s < %s", modRef, cast(b.arg(rng.To), mod.TypeName)))
		case after == nil && rng.From == nil:
			b.where = append(b.where, modRef+" IS NOT NULL") // the NULL phase read those
		}
	}
	s.tenantPredicate(&b)
	order := keyRefs
	if !nullPhase {
		order = append([]string{modRef}, keyRefs...)
	}
	// Each leading column is sent for every row: the modified-at is
	// selected a second time only when the data column cannot stand in
	// for it, and the flag only when some row can be at a cursor that the
	// client cannot compare with itself.
	var lead []string
	lay := pageLayout{at: -1}
	if sc.modCol < 0 {
		lead = append(lead, modRef)
	}
	if after != nil && !clientTwins {
		lay.at = len(lead)
		lead = append(lead, atCursor)
	}
	lay.values = len(lead)
	lay.mod = 0
	if sc.modCol >= 0 {
		lay.mod = lay.values + sc.modCol
	}
	sql := fmt.Sprintf("%sSELECT %s\nFROM %s\nWHERE %s\nORDER BY %s\nLIMIT %d",
		s.with(), strings.Join(append(lead, s.exprs...), ", "), s.from(), strings.Join(b.where, "\n  AND "),
		strings.Join(order, ", "), limit)
	return sql, b.args, lay
}

// Scan reads every row of rng in (modified_at, pk) order, starting at the
// position after start (nil: the beginning), calling fn for each.
//
// Rows whose modified-at is NULL come first, ordered by key, when
// rng.IncludeNull is set; a cursor with a nil ModifiedAt is in that phase.
func (sc *Scanner) Scan(ctx context.Context, rng watermark.Interval, start *watermark.Cursor, fn func(*Row) error) error {
	after := start
	if rng.IncludeNull && (after == nil || after.ModifiedAt == nil) {
		if err := sc.scanPhase(ctx, rng, after, true, fn); err != nil {
			return err
		}
		after = nil
	}
	return sc.scanPhase(ctx, rng, after, false, fn)
}

func (sc *Scanner) scanPhase(ctx context.Context, rng watermark.Interval, after *watermark.Cursor, nullPhase bool, fn func(*Row) error) error {
	row := &Row{scan: &sc.scan}
	// The first page starts at the caller's cursor, which the scan has not
	// seen; every later one at the last row it remembered.
	fromLast := false
	for {
		clientTwins := fromLast && sc.exactTwins
		// A page starts at its cursor inclusively, so the least that
		// moves on is two rows: the cursor's and the next.
		limit := sc.limit(2)
		sql, args, lay := sc.pageSQL(rng, after, nullPhase, limit, clientTwins)
		if !sc.explained && !nullPhase && sc.t.Query != "" {
			sc.explained = true
			sc.checkPushdown(ctx, sql, args)
		}
		rows, err := sc.src.conn.Query(ctx, sql, append([]any{pgxBinary}, args...)...)
		if err != nil {
			return sc.src.classify("read page", err)
		}
		sc.Pages++
		n, skipped := 0, false
		// stop ends the page early. Its error must be made before: closing
		// reads the rest of the page into the buffers that row points at,
		// so an error made after it would describe another row.
		stop := func(err error) error {
			rows.Close()
			return err
		}
		for rows.Next() {
			n++
			raw := rows.RawValues()
			sc.count(raw)
			v := lay.values
			row.Values, row.keyTexts = raw[v:v+sc.ncols], raw[v+sc.ncols:v+sc.ncols+sc.ncopies]
			if sc.t.SoftDelete != "" {
				d := raw[len(raw)-1]
				row.Deleted = len(d) == 1 && d[0] != 0
			}
			row.ModNull = raw[lay.mod] == nil
			if !row.ModNull {
				if row.Mod, err = modFromBinary(sc.t.ModKind, raw[lay.mod]); err != nil {
					return stop(fmt.Errorf("read modified-at: %w", err))
				}
			}
			for j, i := range sc.t.keyIdx {
				if sc.keyRaw(row, j) == nil {
					return stop(fmt.Errorf("%w %q, at %s", ErrNullKey, sc.t.Columns[i].Name, row.keyDescription()))
				}
			}
			var at bool
			switch {
			case lay.at >= 0:
				at = len(raw[lay.at]) == 1 && raw[lay.at][0] != 0
			case clientTwins:
				// Rows at the cursor come first, and a row of these types
				// is at it only when its bytes are the cursor row's: the
				// page's first row, when it is the previous page's last.
				// A second such row is a twin, which the check of
				// sameAsLast below catches.
				at = n == 1 && sc.sameAsLast(row)
			}
			if at {
				// A page starts at its cursor inclusively: its first row is
				// normally the previous page's last, which is skipped once.
				// It is remembered, so that a duplicate of it is caught; a
				// second row at the cursor is one.
				if skipped {
					return stop(fmt.Errorf("%w: %s appears twice in %s, equal to %s to its type's comparison: keyset paging needs (modified_at, key) to be unique",
						ErrDuplicateKey, row.keyDescription(), sc.t.describe(), sc.last.keyDescription()))
				}
				skipped = true
				sc.remember(row)
				continue
			}
			// Rows come in (modified_at, key) order, so a duplicate follows
			// its twin at once.
			if sc.sameAsLast(row) {
				return stop(fmt.Errorf("%w: %s appears twice in %s: keyset paging needs (modified_at, key) to be unique",
					ErrDuplicateKey, row.keyDescription(), sc.t.describe()))
			}
			sc.remember(row)
			if err := fn(row); err != nil {
				return stop(err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return sc.src.classify("read page", err)
		}
		if sc.AfterPage != nil {
			sc.AfterPage()
		}
		if n < limit {
			return nil
		}
		if after, err = sc.LastCursor(); err != nil {
			return err
		}
		fromLast = true
	}
}

// keyDescription names a row by its cursor, for error messages.
func (r *Row) keyDescription() string {
	c, err := r.scan.cursorOfLenient(r)
	if err != nil {
		return "(unreadable key)"
	}
	b, _ := json.Marshal(c)
	return string(b)
}

func (s *scan) cursorOfLenient(r *Row) (map[string]any, error) {
	out := map[string]any{}
	if r.ModNull {
		out[s.t.ModifiedAt] = nil
	} else {
		out[s.t.ModifiedAt] = watermark.Format(s.t.ModKind, r.Mod)
	}
	for j, i := range s.t.keyIdx {
		raw := s.keyRaw(r, j)
		name := s.t.Columns[i].Name
		switch {
		case raw == nil:
			out[name] = nil
		case s.keyCopy[j] >= 0:
			out[name] = string(raw)
		default:
			txt, err := keyText(s.t.Columns[i].TypeOID, raw)
			if err != nil {
				return nil, err
			}
			out[name] = txt
		}
	}
	return out, nil
}

// checkPushdown explains the first page of a custom query and warns when
// the keyset predicates are not pushed into it: every page would then run
// the whole query.
func (sc *Scanner) checkPushdown(ctx context.Context, sql string, args []any) {
	var plan string
	if err := sc.src.conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		return
	}
	if strings.Contains(plan, `"CTE Scan"`) || strings.Contains(plan, `"Subquery Scan"`) {
		if sc.Warn != nil {
			sc.Warn("the source_query's plan does not push the modified-at and key predicates into the query: every page reruns the whole query; simplify it (no LIMIT, DISTINCT, window functions or volatile functions at its top level) or add an index")
		}
	}
}

// Counts are the rows a scan of an incremental run cannot see.
type Counts struct {
	NullModifiedAt int64
	// BeyondTo: stamped at or after the run's upper bound. Of those,
	// Future are stamped after the source's clock (but not infinity), and
	// Infinity 'infinity', which no upper bound ever passes.
	BeyondTo, Future, Infinity int64
}

// CountUnseen counts, within the tenant, the rows whose modified-at is
// NULL, and those stamped at or past to; tz reads the clock for a naive
// column. One statement, whose predicates an index on modified-at serves.
func (sc *Scanner) CountUnseen(ctx context.Context, to, tz string) (Counts, error) {
	var out Counts
	var b sqlBuilder
	mod := sc.t.Columns[sc.t.modIdx]
	m := "t." + quoteIdent(mod.Name)
	toArg := cast(b.arg(to), mod.TypeName)
	clock := "clock_timestamp()"
	if sc.t.ModKind != watermark.Timestamptz {
		clock = fmt.Sprintf("(clock_timestamp() AT TIME ZONE $%d::text)", b.arg(tz))
	}
	clock = fmt.Sprintf("CAST(%s AS %s)", clock, mod.TypeName)
	inf := cast(b.arg("infinity"), mod.TypeName)
	b.where = append(b.where, fmt.Sprintf("(%s IS NULL OR %s >= %s)", m, m, toArg))
	sc.tenantPredicate(&b)
	sql := fmt.Sprintf(`%sSELECT count(*) FILTER (WHERE %[2]s IS NULL), count(*) FILTER (WHERE %[2]s >= %[3]s),
	count(*) FILTER (WHERE %[2]s > %[4]s AND %[2]s <> %[5]s), count(*) FILTER (WHERE %[2]s = %[5]s)
FROM %[6]s WHERE %[7]s`, sc.with(), m, toArg, clock, inf, sc.from(), strings.Join(b.where, " AND "))
	if err := sc.src.conn.QueryRow(ctx, sql, b.args...).Scan(&out.NullModifiedAt, &out.BeyondTo, &out.Future, &out.Infinity); err != nil {
		return out, sc.src.classify("count unseen rows", err)
	}
	return out, nil
}
