package pgsource

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5/pgtype"
)

// PostgreSQL counts time from 2000-01-01; these convert to the Unix epoch.
const (
	pgEpochMicros = 946684800 * 1_000_000
	pgEpochDays   = 10957
)

// Infinity is how the binary forms spell ±infinity.
const (
	infMicros = math.MaxInt64
	infDays   = math.MaxInt32
)

// modFromBinary decodes the binary wire value of the modified-at column.
func modFromBinary(kind watermark.Kind, raw []byte) (watermark.Value, error) {
	switch kind {
	case watermark.Date:
		if len(raw) != 4 {
			return 0, fmt.Errorf("date value of %d bytes", len(raw))
		}
		d := int32(binary.BigEndian.Uint32(raw))
		switch d {
		case infDays:
			return watermark.Infinity, nil
		case -infDays - 1:
			return watermark.NegInfinity, nil
		}
		return watermark.Value(int64(d) + pgEpochDays), nil
	default:
		if len(raw) != 8 {
			return 0, fmt.Errorf("timestamp value of %d bytes", len(raw))
		}
		us := int64(binary.BigEndian.Uint64(raw))
		switch us {
		case infMicros:
			return watermark.Infinity, nil
		case math.MinInt64:
			return watermark.NegInfinity, nil
		}
		return watermark.Value(us + pgEpochMicros), nil
	}
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
		kind := map[uint32]watermark.Kind{pgtype.DateOID: watermark.Date, pgtype.TimestampOID: watermark.Timestamp, pgtype.TimestamptzOID: watermark.Timestamptz}[oid]
		m, err := modFromBinary(kind, raw)
		if err != nil {
			return "", err
		}
		return watermark.Format(kind, m), nil
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
