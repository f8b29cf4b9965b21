package pgsource

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// PostgreSQL counts time from 2000-01-01; these convert to the Unix epoch.
const (
	pgEpochMicros = 946684800 * 1_000_000
	pgEpochDays   = 10957
	microsPerDay  = 86_400_000_000
)

// Infinity is how the binary forms spell ±infinity.
const (
	infMicros = math.MaxInt64
	infDays   = math.MaxInt32
)

// Mod is a modified-at value in a comparable form: microseconds since the
// Unix epoch for timestamps, days since it for dates. ±infinity map to the
// extremes of int64.
type Mod int64

// modFromBinary decodes the binary wire value of the modified-at column.
func modFromBinary(kind ModKind, raw []byte) (Mod, error) {
	switch kind {
	case ModDate:
		if len(raw) != 4 {
			return 0, fmt.Errorf("date value of %d bytes", len(raw))
		}
		d := int32(binary.BigEndian.Uint32(raw))
		switch d {
		case infDays:
			return math.MaxInt64, nil
		case -infDays - 1:
			return math.MinInt64, nil
		}
		return Mod(int64(d) + pgEpochDays), nil
	default:
		if len(raw) != 8 {
			return 0, fmt.Errorf("timestamp value of %d bytes", len(raw))
		}
		us := int64(binary.BigEndian.Uint64(raw))
		switch us {
		case infMicros:
			return math.MaxInt64, nil
		case math.MinInt64:
			return math.MinInt64, nil
		}
		return Mod(us + pgEpochMicros), nil
	}
}

// FormatMod writes a modified-at value as a PostgreSQL literal of the
// column's type: full microsecond precision, UTC for timestamptz.
func FormatMod(kind ModKind, m Mod) string {
	switch m {
	case math.MaxInt64:
		return "infinity"
	case math.MinInt64:
		return "-infinity"
	}
	var t time.Time
	if kind == ModDate {
		t = time.Unix(int64(m)*86400, 0).UTC()
	} else {
		t = time.UnixMicro(int64(m)).UTC()
	}
	year, era := t.Year(), ""
	if year <= 0 {
		year, era = 1-year, " BC" // there is no year 0
	}
	date := fmt.Sprintf("%04d-%02d-%02d", year, t.Month(), t.Day())
	switch kind {
	case ModDate:
		return date + era
	case ModTimestamp:
		return fmt.Sprintf("%s %02d:%02d:%02d.%06d%s", date, t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1000, era)
	default:
		return fmt.Sprintf("%s %02d:%02d:%02d.%06d+00%s", date, t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1000, era)
	}
}

// ParseMod reads back a literal written by FormatMod.
func ParseMod(kind ModKind, s string) (Mod, error) {
	switch s {
	case "infinity":
		return math.MaxInt64, nil
	case "-infinity":
		return math.MinInt64, nil
	}
	bc := strings.HasSuffix(s, " BC")
	s = strings.TrimSuffix(s, " BC")
	layout := "2006-01-02 15:04:05.999999-07"
	switch kind {
	case ModDate:
		layout = "2006-01-02"
	case ModTimestamp:
		layout = "2006-01-02 15:04:05.999999"
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	if bc {
		t = t.AddDate(1-2*t.Year(), 0, 0)
	}
	if kind == ModDate {
		return Mod(t.Unix() / 86400), nil
	}
	return Mod(t.UnixMicro()), nil
}

// Sub moves a value back by d, for the lookback. A date moves back by
// whole days, so that from covers every day the lookback touches.
func (m Mod) Sub(kind ModKind, d time.Duration) Mod {
	if m == math.MaxInt64 || m == math.MinInt64 {
		return m
	}
	if kind == ModDate {
		us := int64(m)*microsPerDay - d.Microseconds()
		days := us / microsPerDay
		if us%microsPerDay < 0 {
			days-- // floor, not truncation, for times before 1970
		}
		return Mod(days)
	}
	return m - Mod(d.Microseconds())
}

// keyText turns the binary value of a key column into a literal of its
// type, for the types isFastKey lists; the others are selected a second
// time as ::text.
func keyText(oid uint32, raw []byte) (string, error) {
	switch oid {
	case pgtype.Int2OID:
		if len(raw) != 2 {
			return "", fmt.Errorf("int2 of %d bytes", len(raw))
		}
		return strconv.FormatInt(int64(int16(binary.BigEndian.Uint16(raw))), 10), nil
	case pgtype.Int4OID:
		if len(raw) != 4 {
			return "", fmt.Errorf("int4 of %d bytes", len(raw))
		}
		return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(raw))), 10), nil
	case pgtype.Int8OID:
		if len(raw) != 8 {
			return "", fmt.Errorf("int8 of %d bytes", len(raw))
		}
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(raw)), 10), nil
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		return string(raw), nil
	case pgtype.BoolOID:
		if len(raw) != 1 {
			return "", fmt.Errorf("bool of %d bytes", len(raw))
		}
		return strconv.FormatBool(raw[0] != 0), nil
	case pgtype.UUIDOID:
		if len(raw) != 16 {
			return "", fmt.Errorf("uuid of %d bytes", len(raw))
		}
		b := raw
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
	case pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID:
		kind := map[uint32]ModKind{pgtype.DateOID: ModDate, pgtype.TimestampOID: ModTimestamp, pgtype.TimestamptzOID: ModTimestamptz}[oid]
		m, err := modFromBinary(kind, raw)
		if err != nil {
			return "", err
		}
		return FormatMod(kind, m), nil
	case pgtype.NumericOID:
		return numericText(raw)
	}
	return "", fmt.Errorf("no binary reader for key type %d", oid)
}

// Sign words of PostgreSQL's binary numeric.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
)

// numericText writes a binary numeric as numeric_out does: every digit, to
// its display scale, so that the literal reads back as the same value.
func numericText(raw []byte) (string, error) {
	if len(raw) < 8 {
		return "", fmt.Errorf("numeric header of %d bytes", len(raw))
	}
	ndigits := int(int16(binary.BigEndian.Uint16(raw)))
	weight := int(int16(binary.BigEndian.Uint16(raw[2:])))
	sign := binary.BigEndian.Uint16(raw[4:])
	dscale := int(binary.BigEndian.Uint16(raw[6:]))
	switch sign {
	case numericNaN:
		return "NaN", nil
	case numericPInf:
		return "Infinity", nil
	case numericNInf:
		return "-Infinity", nil
	case numericPos, numericNeg:
	default:
		return "", fmt.Errorf("numeric sign %#x", sign)
	}
	if ndigits < 0 || len(raw) != 8+2*ndigits || dscale > 0x3fff {
		return "", fmt.Errorf("numeric of %d digits in %d bytes, scale %d", ndigits, len(raw), dscale)
	}
	for k := range ndigits {
		if d := binary.BigEndian.Uint16(raw[8+2*k:]); d > 9999 {
			return "", fmt.Errorf("numeric digit %d", d)
		}
	}
	// digit is the base-10000 digit of weight w (10000^w), zero outside
	// the stored ones.
	digit := func(w int) int {
		k := weight - w
		if k < 0 || k >= ndigits {
			return 0
		}
		return int(binary.BigEndian.Uint16(raw[8+2*k:]))
	}
	var b []byte
	if sign == numericNeg {
		b = append(b, '-')
	}
	if weight < 0 {
		b = append(b, '0')
	}
	for w := weight; w >= 0; w-- {
		d := digit(w)
		if w == weight {
			b = strconv.AppendInt(b, int64(d), 10)
		} else {
			b = fmt.Appendf(b, "%04d", d)
		}
	}
	if dscale > 0 {
		b = append(b, '.')
		frac := len(b)
		for w := -1; len(b)-frac < dscale; w-- {
			b = fmt.Appendf(b, "%04d", digit(w))
		}
		b = b[:frac+dscale]
	}
	return string(b), nil
}
