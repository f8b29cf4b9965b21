package pgsource

import (
	"context"
	"fmt"
	"time"
)

// Bound is the upper end of a run's interval, computed by the server in the
// column's own type before extraction starts.
type Bound struct {
	To  string // literal of the modified-at type
	Mod Mod
	// Now is the server's clock in µs since the epoch, used as the run's
	// _hw_version.
	Now int64
	// Kind says what fixed To: "clock" when nothing held it back.
	Kind   string
	Detail string
}

// UpperBound samples the server's clock as a value of the modified-at
// column's type. tz interprets naive timestamps and dates.
func (s *Source) UpperBound(ctx context.Context, t *Table, tz string) (Bound, error) {
	var expr string
	switch t.ModKind {
	case ModTimestamptz:
		expr = "clock_timestamp()"
	case ModTimestamp:
		expr = "(clock_timestamp() AT TIME ZONE $1::text)"
	case ModDate:
		// A date column's rows of today are read now and again tomorrow:
		// the bound is the end of today.
		expr = "((clock_timestamp() AT TIME ZONE $1::text)::date + 1)"
	}
	args := []any{}
	if t.ModKind != ModTimestamptz {
		args = append(args, tz)
	}
	var nowUnix time.Time
	var raw []byte
	rows, err := s.conn.Query(ctx, "SELECT clock_timestamp(), "+expr, args...)
	if err != nil {
		return Bound{}, s.classify("read the source clock", err)
	}
	for rows.Next() {
		vals := rows.RawValues()
		raw = append([]byte(nil), vals[1]...)
		if err := rows.Scan(&nowUnix, nil); err != nil {
			rows.Close()
			return Bound{}, s.classify("read the source clock", err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Bound{}, s.classify("read the source clock", err)
	}
	if rows.FieldDescriptions()[1].Format != 1 {
		return Bound{}, fmt.Errorf("read the source clock: unexpected text result")
	}
	m, err := modFromBinary(t.ModKind, raw)
	if err != nil {
		return Bound{}, fmt.Errorf("read the source clock: %w", err)
	}
	return Bound{To: FormatMod(t.ModKind, m), Mod: m, Now: nowUnix.UnixMicro(), Kind: "clock"}, nil
}

// Normalize reads a literal given by a person (a backfill window's end,
// say) through the column's type input function, and returns it in the
// form this package writes.
func (s *Source) Normalize(ctx context.Context, t *Table, literal string) (string, Mod, error) {
	mod := t.Columns[t.modIdx]
	rows, err := s.conn.Query(ctx, "SELECT "+cast(1, mod.TypeName), pgxBinary, literal)
	if err != nil {
		return "", 0, s.classify(fmt.Sprintf("read %q as %s", literal, mod.TypeName), err)
	}
	defer rows.Close()
	var raw []byte
	for rows.Next() {
		raw = append([]byte(nil), rows.RawValues()[0]...)
	}
	if err := rows.Err(); err != nil {
		return "", 0, fmt.Errorf("read %q as %s: %w: %w", literal, mod.TypeName, scrubErr(err, s.password), ErrBadModel)
	}
	m, err := modFromBinary(t.ModKind, raw)
	if err != nil {
		return "", 0, err
	}
	return FormatMod(t.ModKind, m), m, nil
}
