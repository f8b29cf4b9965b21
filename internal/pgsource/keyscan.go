package pgsource

import (
	"context"
	"fmt"
	"strings"
)

// KeyScanner reads a model in primary-key order, for a comparison with the
// lake, and reads rows back by key, for a repair. Each page is one short
// statement: no transaction is held open across pages.
type KeyScanner struct {
	scan
	PageSize
	// ReadKeys is the most keys of one keyed read.
	ReadKeys int
	// Pages counts the statements run.
	Pages int64
	// lead is how many columns a page selects before the select
	// expressions: the modified-at, selected a second time only when its
	// own expression is not the bare column (Scanner.modCol).
	lead int
	// modAt is the position in a page's columns of the modified-at.
	modAt int
}

// Window restricts a key scan to rows whose modified-at lies in
// [From, To); a nil bound is open. Either bound excludes rows whose
// modified-at is NULL.
type Window struct {
	From, To *string
}

// NewKeyScanner prepares to read t with the given select expressions, one
// per column of t; an expression may be "NULL" for a column the caller
// does not need. Key columns are read as NewScanner reads them, so that
// Row.Cursor gives literals of their types.
func (s *Source) NewKeyScanner(t *Table, selectExprs []string) *KeyScanner {
	sc := s.NewScanner(t, selectExprs)
	ks := &KeyScanner{scan: sc.scan, PageSize: PageSize{PageRows: 50_000, FirstPageRows: 50_000}, ReadKeys: 50_000}
	// Each column is sent for every row, at a cost to the server of
	// about one fifth of a narrow row's: the data column stands in for
	// the modified-at when it can, as in Scanner.
	if sc.modCol >= 0 {
		ks.modAt = sc.modCol
	} else {
		ks.lead = 1
	}
	return ks
}

func (ks *KeyScanner) keyRefs() []string {
	refs := make([]string, len(ks.t.keyIdx))
	for j, i := range ks.t.keyIdx {
		refs[j] = "t." + quoteIdent(ks.t.Columns[i].Name)
	}
	return refs
}

func (ks *KeyScanner) windowPredicate(b *sqlBuilder, w Window) {
	mod := ks.t.Columns[ks.t.modIdx]
	ref := "t." + quoteIdent(mod.Name)
	if w.From != nil {
		b.where = append(b.where, fmt.Sprintf("%s >= %s", ref, cast(b.arg(*w.From), mod.TypeName)))
	}
	if w.To != nil {
		b.where = append(b.where, fmt.Sprintf("%s < %s", ref, cast(b.arg(*w.To), mod.TypeName)))
	}
}

func (ks *KeyScanner) selectList() string {
	list := strings.Join(ks.exprs, ", ")
	if ks.lead > 0 {
		list = "t." + quoteIdent(ks.t.Columns[ks.t.modIdx].Name) + ", " + list
	}
	return list
}

// pageSQL builds one page after the key of after (nil: from the start).
// The key is unique (discovery checks it), so a strict comparison skips
// nothing.
func (ks *KeyScanner) pageSQL(w Window, after []string, limit int) (string, []any) {
	var b sqlBuilder
	refs := ks.keyRefs()
	if after != nil {
		params := make([]string, len(refs))
		for j, i := range ks.t.keyIdx {
			params[j] = cast(b.arg(after[j]), ks.t.Columns[i].TypeName)
		}
		b.where = append(b.where, fmt.Sprintf("(%s) > (%s)", strings.Join(refs, ", "), strings.Join(params, ", ")))
	}
	ks.windowPredicate(&b, w)
	ks.tenantPredicate(&b)
	where := "true"
	if len(b.where) > 0 {
		where = strings.Join(b.where, "\n  AND ")
	}
	sql := fmt.Sprintf("%sSELECT %s\nFROM %s\nWHERE %s\nORDER BY %s\nLIMIT %d",
		ks.with(), ks.selectList(), ks.from(), where, strings.Join(refs, ", "), limit)
	return sql, b.args
}

// Scan calls fn for every row of the window in key order.
func (ks *KeyScanner) Scan(ctx context.Context, w Window, fn func(*Row) error) error {
	var after []string
	for {
		// A page starts after its cursor's key, so one row moves on.
		limit := ks.limit(1)
		sql, args := ks.pageSQL(w, after, limit)
		n, last, err := ks.query(ctx, sql, args, limit, fn)
		if err != nil {
			return err
		}
		if n < limit {
			return nil
		}
		after = last
	}
}

// Read calls fn for each row whose key is one of keys (each a literal per
// key column, as Row.Cursor gives them), within the tenant. Keys that no
// row has are skipped; the caller tells them by the rows it gets.
func (ks *KeyScanner) Read(ctx context.Context, keys [][]string, fn func(*Row) error) error {
	for len(keys) > 0 {
		n := min(len(keys), ks.ReadKeys)
		batch := keys[:n]
		keys = keys[n:]
		var b sqlBuilder
		cols := make([]string, len(ks.t.keyIdx))
		casts := make([]string, len(ks.t.keyIdx))
		for j, i := range ks.t.keyIdx {
			vals := make([]string, len(batch))
			for r, k := range batch {
				vals[r] = k[j]
			}
			cols[j] = fmt.Sprintf("$%d::text[]", b.arg(vals))
			casts[j] = fmt.Sprintf("CAST(u.k%d AS %s)", j, ks.t.Columns[i].TypeName)
		}
		names := make([]string, len(cols))
		for j := range names {
			names[j] = fmt.Sprintf("k%d", j)
		}
		b.where = append(b.where, fmt.Sprintf("(%s) IN (SELECT %s FROM unnest(%s) AS u(%s))",
			strings.Join(ks.keyRefs(), ", "), strings.Join(casts, ", "), strings.Join(cols, ", "), strings.Join(names, ", ")))
		ks.tenantPredicate(&b)
		sql := fmt.Sprintf("%sSELECT %s\nFROM %s\nWHERE %s", ks.with(), ks.selectList(), ks.from(), strings.Join(b.where, "\n  AND "))
		if _, _, err := ks.query(ctx, sql, b.args, 0, fn); err != nil {
			return err
		}
	}
	return nil
}

// query runs one statement and returns how many rows it gave and, when
// they were limit, the key literals of the last: where the next page
// starts.
func (ks *KeyScanner) query(ctx context.Context, sql string, args []any, limit int, fn func(*Row) error) (int, []string, error) {
	rows, err := ks.src.conn.Query(ctx, sql, append([]any{pgxBinary}, args...)...)
	if err != nil {
		return 0, nil, ks.src.classify("read page", err)
	}
	ks.Pages++
	row := &Row{scan: &ks.scan}
	n := 0
	var last []string
	stop := func(err error) (int, []string, error) {
		rows.Close()
		return n, nil, err
	}
	for rows.Next() {
		n++
		raw := rows.RawValues()
		ks.count(raw)
		row.Values, row.keyTexts = raw[ks.lead:ks.lead+ks.ncols], raw[ks.lead+ks.ncols:]
		row.ModNull = raw[ks.modAt] == nil
		if !row.ModNull {
			if row.Mod, err = modFromBinary(ks.t.ModKind, raw[ks.modAt]); err != nil {
				return stop(fmt.Errorf("read modified-at: %w", err))
			}
		}
		for j, i := range ks.t.keyIdx {
			if ks.keyRaw(row, j) == nil {
				return stop(fmt.Errorf("%w %q", ErrNullKey, ks.t.Columns[i].Name))
			}
		}
		if n == limit {
			c, err := row.Cursor()
			if err != nil {
				return stop(err)
			}
			last = c.Key
		}
		if err := fn(row); err != nil {
			return stop(err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return n, nil, ks.src.classify("read page", err)
	}
	return n, last, nil
}

// ClockMicros is the source's clock in µs since the Unix epoch: the clock
// every export's _hw_version is read from.
func (s *Source) ClockMicros(ctx context.Context) (int64, error) {
	var us int64
	err := s.conn.QueryRow(ctx, "SELECT (EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::int8").Scan(&us)
	if err != nil {
		return 0, s.classify("read the source clock", err)
	}
	return us, nil
}

// KeyColumns are the positions in Table.Columns of the key columns, in
// key order; ModColumn is that of the modified-at column.
func (t *Table) KeyColumns() []int { return append([]int(nil), t.keyIdx...) }

// ModColumn is the position in Table.Columns of the modified-at column.
func (t *Table) ModColumn() int { return t.modIdx }
