package watermark

import "time"

// Interval is the half-open range [From, To) of the modified-at column that
// a run reads. Values are literals written by Format.
type Interval struct {
	From *string `json:"from"` // nil: no lower bound
	To   string  `json:"to"`
	// IncludeNull: rows whose modified-at is NULL are read too (first run and
	// full refresh).
	IncludeNull bool `json:"include_null,omitempty"`
	// IncludeBeyondTo: rows stamped at or after To are read too (a full
	// refresh, which replaces every earlier file, reads every stamp).
	IncludeBeyondTo bool `json:"include_beyond_to,omitempty"`
}

// Cursor is a position in (modified_at, pk...) order. Key values are
// PostgreSQL text literals of the key columns' types, so that an int8 above
// 2^53 or a numeric never passes through a float.
type Cursor struct {
	ModifiedAt *string  `json:"modified_at"` // nil for a row with NULL modified-at
	Key        []string `json:"key"`
}

// Equal reports whether two cursors name the same position.
func (c *Cursor) Equal(o *Cursor) bool {
	if (c.ModifiedAt == nil) != (o.ModifiedAt == nil) {
		return false
	}
	if c.ModifiedAt != nil && *c.ModifiedAt != *o.ModifiedAt {
		return false
	}
	if len(c.Key) != len(o.Key) {
		return false
	}
	for i := range c.Key {
		if c.Key[i] != o.Key[i] {
			return false
		}
	}
	return true
}

// WidenForFallBack lowers the from of a naive timestamp column read in loc
// when the zone's clocks fell back between from and now: rows stamped in
// the repeated hour carry wall times below from. A naive from is
// ambiguous inside the repeated hour itself, so it is taken at its
// earliest reading, which widens the most.
func WidenForFallBack(from Value, loc *time.Location, now time.Time) Value {
	if from.IsInfinite() {
		return from
	}
	if d := earliestOffset(from, loc) - offsetAt(now, loc); d > 0 {
		return from - Value(int64(d)*microsPerSecond)
	}
	return from
}

// earliestOffset is the largest UTC offset under which the naive wall time
// occurs in loc: the offset of its first occurrence.
func earliestOffset(wall Value, loc *time.Location) int {
	asUTC := time.UnixMicro(int64(wall)).UTC()
	best, found := 0, false
	// The offsets in force within a few hours either side include every
	// reading of an ambiguous wall time.
	for _, probe := range []time.Duration{-6 * time.Hour, 0, 6 * time.Hour} {
		off := offsetAt(asUTC.Add(probe), loc)
		instant := asUTC.Add(-time.Duration(off) * time.Second)
		if offsetAt(instant, loc) == off && (!found || off > best) {
			best, found = off, true
		}
	}
	if !found {
		return offsetAt(asUTC, loc) // a wall time skipped by a spring-forward
	}
	return best
}

func offsetAt(t time.Time, loc *time.Location) int {
	_, off := t.In(loc).Zone()
	return off
}
