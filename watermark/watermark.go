// Package watermark owns the value of a model's modified-at column: its
// kind, its exact text form, the lookback arithmetic, and the positions and
// intervals built from it. Every other package (the source, the exporter,
// the manifests, dedupe) takes these from here, so that there is one rule
// for what a watermark means.
//
// A value is kept in two forms. In state documents it is a PostgreSQL
// literal of the column's own type, written by Format: full microsecond
// precision, UTC for timestamptz, " BC" for years before 1 AD. In memory it
// is a Value, an int64 that orders like the column: microseconds since the
// Unix epoch for timestamps, days since it for dates, with ±infinity at the
// extremes of int64. Format and Parse are exact inverses over every value
// PostgreSQL can hold.
package watermark

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DefaultLookback is how far below the committed watermark a run starts
// reading, so that rows committed late are read again: PostgreSQL's, as the
// established tools use.
const DefaultLookback = 30 * time.Second

// Kind is the type class of a modified-at column.
type Kind int

// The modified-at types that can order changes.
const (
	Timestamptz Kind = iota
	Timestamp
	Date
)

var kindNames = [...]string{Timestamptz: "timestamptz", Timestamp: "timestamp", Date: "date"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// ParseKind reads a kind's String form.
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown modified-at kind %q: want timestamptz, timestamp or date", s)
}

// Value is a modified-at value in a form that orders like the column.
type Value int64

// The values PostgreSQL spells 'infinity' and '-infinity'.
const (
	Infinity    Value = math.MaxInt64
	NegInfinity Value = math.MinInt64
)

// IsInfinite reports whether v is ±infinity.
func (v Value) IsInfinite() bool { return v == Infinity || v == NegInfinity }

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond
)

// ErrSyntax: a literal is not in the form Format writes.
var ErrSyntax = errors.New("not a watermark literal")

// ErrRange: a literal names a time that a Value cannot hold.
var ErrRange = errors.New("watermark out of range")

// Format writes v as a PostgreSQL literal of kind's type.
func Format(k Kind, v Value) string {
	switch v {
	case Infinity:
		return "infinity"
	case NegInfinity:
		return "-infinity"
	}
	days, micros := int64(v), int64(0)
	if k != Date {
		days, micros = floorDiv(int64(v), microsPerDay)
	}
	y, m, d := civilFromDays(days)
	era := ""
	if y <= 0 {
		y, era = 1-y, " BC" // there is no year 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%04d-%02d-%02d", y, m, d)
	if k != Date {
		secs, frac := micros/microsPerSecond, micros%microsPerSecond
		fmt.Fprintf(&b, " %02d:%02d:%02d.%06d", secs/3600, secs/60%60, secs%60, frac)
		if k == Timestamptz {
			b.WriteString("+00")
		}
	}
	b.WriteString(era)
	return b.String()
}

// Parse reads a literal written by Format. It also takes a fraction of
// fewer than six digits, or none.
func Parse(k Kind, s string) (Value, error) {
	switch s {
	case "infinity":
		return Infinity, nil
	case "-infinity":
		return NegInfinity, nil
	}
	v, err := parse(k, s)
	if err != nil {
		return 0, fmt.Errorf("parse %s %q: %w", k, s, err)
	}
	return v, nil
}

func parse(k Kind, s string) (Value, error) {
	rest, bc := strings.CutSuffix(s, " BC")
	date, clock, hasClock := strings.Cut(rest, " ")
	if hasClock != (k != Date) {
		return 0, ErrSyntax
	}
	y, m, d, err := parseDate(date)
	if err != nil {
		return 0, err
	}
	if bc {
		if y == 0 {
			return 0, ErrSyntax
		}
		y = 1 - y
	}
	if d > daysIn(y, m) {
		return 0, ErrSyntax
	}
	if y > maxYear || y < -maxYear {
		return 0, ErrRange // its day count would overflow
	}
	days := daysFromCivil(y, m, d)
	if k == Date {
		return Value(days), nil
	}
	if k == Timestamptz {
		var ok bool
		if clock, ok = strings.CutSuffix(clock, "+00"); !ok {
			return 0, ErrSyntax
		}
	}
	tod, err := parseClock(clock)
	if err != nil {
		return 0, err
	}
	const maxDays = math.MaxInt64/microsPerDay - 1
	if days > maxDays || days < -maxDays {
		return 0, ErrRange
	}
	return Value(days*microsPerDay + tod), nil
}

// maxYear bounds the years Parse takes, so that daysFromCivil cannot
// overflow: far beyond PostgreSQL's latest date, 5874897 AD.
const maxYear = 1_000_000_000_000

// parseDate reads YYYY-MM-DD, with four or more year digits; the caller
// checks the day against the month once it knows the era.
func parseDate(s string) (y int64, m, d int, err error) {
	ys, md, ok := strings.Cut(s, "-")
	if !ok || len(ys) < 4 || len(md) != 5 || md[2] != '-' {
		return 0, 0, 0, ErrSyntax
	}
	if y, err = digits(ys); err != nil {
		return 0, 0, 0, err
	}
	mm, err1 := digits(md[:2])
	dd, err2 := digits(md[3:])
	if err1 != nil || err2 != nil || mm < 1 || mm > 12 || dd < 1 || dd > 31 {
		return 0, 0, 0, ErrSyntax
	}
	return y, int(mm), int(dd), nil
}

// parseClock reads HH:MM:SS[.ffffff] into microseconds of the day.
func parseClock(s string) (int64, error) {
	hms, frac, hasFrac := strings.Cut(s, ".")
	if len(hms) != 8 || hms[2] != ':' || hms[5] != ':' {
		return 0, ErrSyntax
	}
	h, err1 := digits(hms[:2])
	mi, err2 := digits(hms[3:5])
	sec, err3 := digits(hms[6:])
	if err1 != nil || err2 != nil || err3 != nil || h > 23 || mi > 59 || sec > 59 {
		return 0, ErrSyntax
	}
	var us int64
	if hasFrac {
		if len(frac) == 0 || len(frac) > 6 {
			return 0, ErrSyntax
		}
		f, err := digits(frac)
		if err != nil {
			return 0, err
		}
		for range 6 - len(frac) {
			f *= 10
		}
		us = f
	}
	return ((h*60+mi)*60+sec)*microsPerSecond + us, nil
}

func digits(s string) (int64, error) {
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, ErrSyntax
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrRange
	}
	return n, nil
}

// Sub moves v back by the lookback d. A date moves back by whole days, so
// that from covers every day the lookback touches. ±infinity stay.
func (v Value) Sub(k Kind, d time.Duration) Value {
	if v.IsInfinite() || d <= 0 {
		return v
	}
	if k == Date {
		// floor((v·day − d) / day) = v − ceil(d / day), without the
		// product, which overflows for dates far in the future.
		us := d.Microseconds()
		return v.sub(Value((us + microsPerDay - 1) / microsPerDay))
	}
	return v.sub(Value(d.Microseconds()))
}

func (v Value) sub(n Value) Value {
	if v < NegInfinity+1+n {
		return NegInfinity + 1 // the earliest finite value, not -infinity
	}
	return v - n
}

// Time returns the instant of a timestamp value (read as UTC for a naive
// one), or midnight UTC of a date. ok is false for ±infinity.
func (v Value) Time(k Kind) (t time.Time, ok bool) {
	if v.IsInfinite() {
		return time.Time{}, false
	}
	if k == Date {
		return time.Unix(int64(v)*86400, 0).UTC(), true
	}
	return time.UnixMicro(int64(v)).UTC(), true
}

// FromTime is the value of t: its instant in microseconds for timestamps
// (a naive timestamp takes t's wall clock in UTC), its UTC day for dates.
func FromTime(k Kind, t time.Time) Value {
	if k == Date {
		days, _ := floorDiv(t.Unix(), 86400)
		return Value(days)
	}
	return Value(t.UnixMicro())
}

func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}

// daysFromCivil counts days from 1970-01-01 to y-m-d of the proleptic
// Gregorian calendar (year 0 is 1 BC), as PostgreSQL's calendar does.
// Howard Hinnant's algorithm: exact for every int64-sized year we accept.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era, _ := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := int64((153*mp+2)/5 + d - 1)
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era, _ := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int((mp+2)%12 + 1)
	if m <= 2 {
		y++
	}
	return y, m, d
}

// daysIn is the length of month m of the astronomical year y.
func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
