package pgsource

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
)

// DeleteLog reads one model's entries of the delete log.
type DeleteLog struct {
	src *Source
	t   *Table
	reg *DeleteLogTable
	tz  string
	// keyPos holds, per key column of the model, its 1-based place in the
	// log's key array.
	keyPos []int
	// PageRows is the LIMIT of each page; Pages counts the statements run.
	PageRows int
	Pages    int64
}

// OpenDeleteLog finds the log of t's table and checks that it records
// the model's key and tenant columns. tz reads a naive modified-at column,
// whose tombstones carry the delete time in that zone.
func (s *Source) OpenDeleteLog(ctx context.Context, t *Table, tz string) (*DeleteLog, error) {
	if t.RelOID == 0 {
		return nil, fmt.Errorf("%w: a source_query has no delete log: use a soft-delete column: %w", ErrNoDeleteLog, ErrBadModel)
	}
	notInstalled := fmt.Errorf("%w on %s: install it with highwater deletes install --source URL --table %s (it records deletes from then on, so run --full-refresh after)",
		ErrNoDeleteLog, t.Relation, t.Relation)
	if !s.hasDeleteLogSchema(ctx) {
		return nil, notInstalled
	}
	reg, err := s.deleteLogTable(ctx, t.RelOID)
	if errors.Is(err, ErrNoDeleteLog) {
		return nil, notInstalled
	}
	if err != nil {
		return nil, fmt.Errorf("read the delete log of %s: %w", t.Relation, err)
	}
	reinstall := fmt.Sprintf("reinstall it with highwater deletes install --table %s --primary-key %s", t.Relation, strings.Join(t.PrimaryKey, ","))
	if t.TenantColumn != "" {
		reinstall += " --tenant-column " + t.TenantColumn
	}
	if !slices.Contains(reg.Triggers, triggerDelete) || !slices.Contains(reg.Triggers, triggerTruncate) {
		return nil, fmt.Errorf("%w: the delete log of %s is registered but its triggers are gone (%v): %s, then run --full-refresh",
			ErrNoDeleteLog, t.Relation, reg.Triggers, reinstall)
	}
	d := &DeleteLog{src: s, t: t, reg: reg, tz: tz, PageRows: 50_000}
	for _, k := range t.PrimaryKey {
		i := slices.Index(reg.KeyColumns, k)
		if i < 0 || len(reg.KeyColumns) != len(t.PrimaryKey) {
			return nil, fmt.Errorf("the delete log of %s records the key (%s), not the model's (%s): %s: %w",
				t.Relation, strings.Join(reg.KeyColumns, ", "), strings.Join(t.PrimaryKey, ", "), reinstall, ErrBadModel)
		}
		d.keyPos = append(d.keyPos, i+1)
	}
	if reg.TenantColumn != t.TenantColumn {
		return nil, fmt.Errorf("the delete log of %s records the tenant column %s, not the model's %s: %s: %w",
			t.Relation, quotedOrNone(reg.TenantColumn), quotedOrNone(t.TenantColumn), reinstall, ErrBadModel)
	}
	return d, nil
}

func quotedOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return strconv.Quote(s)
}

// asInstant turns a literal of the modified-at column's type, bound as
// parameter n, into the instant the log's timestamptz compares with: a
// naive value is read in the model's time zone, a date as its midnight.
func (d *DeleteLog) asInstant(b *sqlBuilder, lit string) string {
	switch d.t.ModKind {
	case watermark.Timestamp:
		return fmt.Sprintf("(CAST($%d::text AS pg_catalog.timestamp) AT TIME ZONE $%d::text)", b.arg(lit), b.arg(d.tz))
	case watermark.Date:
		return fmt.Sprintf("(CAST(CAST($%d::text AS pg_catalog.date) AS pg_catalog.timestamp) AT TIME ZONE $%d::text)", b.arg(lit), b.arg(d.tz))
	}
	return fmt.Sprintf("CAST($%d::text AS pg_catalog.timestamptz)", b.arg(lit))
}

// asModifiedAt is the delete time of entry l in the modified-at column's
// type: what a tombstone carries, so that dedupe orders it against the
// row's versions.
func (d *DeleteLog) asModifiedAt(b *sqlBuilder) string {
	mod := d.t.Columns[d.t.modIdx]
	v := "l.deleted_at"
	switch d.t.ModKind {
	case watermark.Timestamp:
		v = fmt.Sprintf("(l.deleted_at AT TIME ZONE $%d::text)", b.arg(d.tz))
	case watermark.Date:
		v = fmt.Sprintf("CAST(l.deleted_at AT TIME ZONE $%d::text AS pg_catalog.date)", b.arg(d.tz))
	}
	return fmt.Sprintf("CAST(%s AS %s)", v, mod.TypeName)
}

// GapError says why the log cannot vouch for a run's deletes; its message
// is the one line a user reads.
type GapError struct{ msg string }

func (e *GapError) Error() string        { return e.msg }
func (e *GapError) Is(target error) bool { return target == ErrDeleteLogGap }

// Check stops a run whose deletes the log may have lost: when it was
// pruned past from (a literal of the modified-at type), or records a
// TRUNCATE of the table at or after since (the committed watermark, or
// sinceAt, when set, the instant it stands for: a date watermark is a day
// that is read again, whose midnight lies before the run that set it),
// whose rows left no entries. Either is nil when the run has none.
func (d *DeleteLog) Check(ctx context.Context, from, since *string, sinceAt *time.Time) error {
	var b sqlBuilder
	rel := b.arg(d.t.RelOID)
	past, trunc, late := "false", "NULL::timestamptz", "false"
	if from != nil {
		past = fmt.Sprintf("r.pruned_to > %s", d.asInstant(&b, *from))
	}
	if since != nil {
		at := ""
		if sinceAt != nil {
			at = fmt.Sprintf("$%d::timestamptz", b.arg(*sinceAt))
		} else {
			at = d.asInstant(&b, *since)
		}
		trunc = fmt.Sprintf("(SELECT min(l.deleted_at) FROM highwater.delete_log l WHERE l.relid = r.relid AND l.is_truncate AND l.deleted_at >= %s)", at)
		late = fmt.Sprintf("r.installed_at > %s", at)
	}
	sql := fmt.Sprintf("SELECT r.pruned_to, coalesce(%s, false), %s, r.installed_at, %s FROM highwater.delete_log_tables r WHERE r.relid = $%d", past, trunc, late, rel)
	var prunedTo, truncAt *time.Time
	var installed time.Time
	var pruned, installedLate bool
	err := d.src.conn.QueryRow(ctx, sql, b.args...).Scan(&prunedTo, &pruned, &truncAt, &installed, &installedLate)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: the delete log of %s was uninstalled during the run", ErrNoDeleteLog, d.t.Relation)
	}
	if err != nil {
		return d.src.deleteLogErr("read the delete log of "+d.t.Relation, err)
	}
	switch {
	case installedLate:
		// Reinstalled (after an uninstall, or with another key) since the
		// watermark: what was deleted in between was recorded nowhere. A
		// full refresh planned after the install leaves its watermark
		// after it, so the runs that follow it pass.
		return &GapError{fmt.Sprintf("the delete log of %s was installed at %s, after the watermark %s, so deletes before it were not recorded; run --full-refresh to rebuild the baseline",
			d.t.Relation, instant(installed), *since)}
	case pruned:
		return &GapError{fmt.Sprintf("the delete log of %s was pruned up to %s, past this run's lower bound %s; run --full-refresh to rebuild the baseline",
			d.t.Relation, instant(*prunedTo), *from)}
	case truncAt != nil:
		return &GapError{fmt.Sprintf("the delete log of %s records a TRUNCATE at %s, after the watermark %s, which left no entry per row; run --full-refresh to rebuild the baseline",
			d.t.Relation, instant(*truncAt), *since)}
	}
	return nil
}

func instant(t time.Time) string {
	return watermark.Format(watermark.Timestamptz, watermark.FromTime(watermark.Timestamptz, t))
}

// Tombstone is one delete log entry, as a row of the table's columns: the
// key, the tenant and the modified-at (the delete time) set, every other
// column NULL. Its values are valid only inside the callback.
type Tombstone struct {
	// Values are in the order of Table.Columns and in the form of the
	// select expressions given to Scan; nil is NULL.
	Values [][]byte
	Mod    watermark.Value
	// Cursor is the entry's place in the log, (deleted_at, id).
	Cursor *watermark.Cursor
}

// Scan reads the entries deleted in rng (the modified-at interval of the
// run, read as instants) after the cursor after, in (deleted_at, id)
// order, in keyset pages, and calls fn with each as a tombstone. An entry
// whose key is in the table again (re-inserted, or deleted and re-inserted
// in one transaction, whose row's stamp may precede the delete's) is
// skipped: the row that holds the key now is its newest version.
func (d *DeleteLog) Scan(ctx context.Context, selectExprs []string, rng watermark.Interval, after *watermark.Cursor, fn func(*Tombstone) error) error {
	t := d.t
	cols := slices.Clone(t.keyIdx)
	cols = append(cols, t.modIdx)
	if t.tenantIdx >= 0 && !slices.Contains(cols, t.tenantIdx) {
		cols = append(cols, t.tenantIdx)
	}
	tomb := &Tombstone{Values: make([][]byte, len(t.Columns))}
	for {
		var b sqlBuilder
		rel := b.arg(t.RelOID)
		inner := []string{"l.id AS _hw_id", "l.deleted_at AS _hw_at"}
		var exists []string
		for j, i := range t.keyIdx {
			c := t.Columns[i]
			val := fmt.Sprintf("CAST(l.key[%d] AS %s)", d.keyPos[j], c.TypeName)
			inner = append(inner, val+" AS "+quoteIdent(c.Name))
			exists = append(exists, fmt.Sprintf("r.%s = %s", quoteIdent(c.Name), val))
		}
		inner = append(inner, d.asModifiedAt(&b)+" AS "+quoteIdent(t.ModifiedAt))
		where := []string{fmt.Sprintf("l.relid = $%d", rel), "NOT l.is_truncate"}
		if t.tenantIdx >= 0 {
			c := t.Columns[t.tenantIdx]
			val := fmt.Sprintf("CAST(l.tenant AS %s)", c.TypeName)
			if !slices.Contains(t.keyIdx, t.tenantIdx) {
				inner = append(inner, val+" AS "+quoteIdent(c.Name))
			}
			where = append(where, fmt.Sprintf("%s = %s", val, cast(b.arg(*t.Tenant), c.TypeName)))
		}
		if after != nil {
			id, err := strconv.ParseInt(after.Key[0], 10, 64)
			if err != nil {
				return fmt.Errorf("read the delete log cursor %v: %w", after.Key, err)
			}
			where = append(where, fmt.Sprintf("(l.deleted_at, l.id) > (CAST($%d::text AS pg_catalog.timestamptz), $%d::int8)", b.arg(*after.ModifiedAt), b.arg(id)))
		} else if rng.From != nil {
			where = append(where, "l.deleted_at >= "+d.asInstant(&b, *rng.From))
		}
		where = append(where, "l.deleted_at < "+d.asInstant(&b, rng.To))
		where = append(where, fmt.Sprintf("NOT EXISTS (SELECT FROM %s r WHERE %s)", t.Relation, strings.Join(exists, " AND ")))
		exprs := make([]string, len(cols))
		for k, i := range cols {
			exprs[k] = selectExprs[i]
		}
		sql := fmt.Sprintf(`SELECT t._hw_at, t._hw_id, t.%s, %s
FROM (SELECT %s
	FROM highwater.delete_log l
	WHERE %s
	ORDER BY l.deleted_at, l.id
	LIMIT %d) AS t
ORDER BY t._hw_at, t._hw_id`, quoteIdent(t.ModifiedAt), strings.Join(exprs, ", "), strings.Join(inner, ", "), strings.Join(where, "\n\t  AND "), d.PageRows)
		rows, err := d.src.conn.Query(ctx, sql, append([]any{pgxBinary}, b.args...)...)
		if err != nil {
			return d.src.deleteLogErr("read the delete log of "+t.Relation, err)
		}
		d.Pages++
		n := 0
		var last watermark.Cursor
		for rows.Next() {
			n++
			raw := rows.RawValues()
			at, err := modFromBinary(watermark.Timestamptz, raw[0])
			if err != nil || len(raw[1]) != 8 {
				rows.Close()
				return fmt.Errorf("read a delete log entry of %s: %v", t.Relation, err)
			}
			atLit := watermark.Format(watermark.Timestamptz, at)
			last = watermark.Cursor{ModifiedAt: &atLit, Key: []string{strconv.FormatInt(int64(binary.BigEndian.Uint64(raw[1])), 10)}}
			if tomb.Mod, err = modFromBinary(t.ModKind, raw[2]); err != nil {
				rows.Close()
				return fmt.Errorf("read a delete log entry of %s: %w", t.Relation, err)
			}
			clear(tomb.Values)
			for k, i := range cols {
				tomb.Values[i] = raw[3+k]
			}
			c := last
			tomb.Cursor = &c
			if err := fn(tomb); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return d.src.deleteLogErr("read the delete log of "+t.Relation, err)
		}
		if n < d.PageRows {
			return nil
		}
		after = &last
	}
}
