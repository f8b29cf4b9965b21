package formats

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/parquet-go/parquet-go"
)

// u128 is an unsigned 128-bit magnitude: DECIMAL(38) needs 127 bits, and
// math/big would allocate per value.
type u128 struct{ hi, lo uint64 }

func (a u128) mulAdd(m, add uint64) (u128, bool) {
	h1, l := bits.Mul64(a.lo, m)
	h2, hi := bits.Mul64(a.hi, m)
	if h2 != 0 {
		return a, false
	}
	hi, c := bits.Add64(hi, h1, 0)
	if c != 0 {
		return a, false
	}
	l, c = bits.Add64(l, add, 0)
	hi, c = bits.Add64(hi, 0, c)
	if c != 0 {
		return a, false
	}
	return u128{hi, l}, true
}

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

var (
	pow10u64 [20]uint64
	pow10u   [39]u128 // 10^0 .. 10^38
)

func init() {
	pow10u64[0] = 1
	for i := 1; i < len(pow10u64); i++ {
		pow10u64[i] = pow10u64[i-1] * 10
	}
	pow10u[0] = u128{0, 1}
	for i := 1; i < len(pow10u); i++ {
		pow10u[i], _ = pow10u[i-1].mulAdd(10, 0)
	}
}

// decimalBytes is the width of a FIXED_LEN_BYTE_ARRAY DECIMAL of precision
// p, computed as Spark does (minBytesForPrecision), so that files look like
// the ones Spark writes.
func decimalBytes(p int) int {
	n := 1
	for math.Pow(2, float64(8*n-1)) < math.Pow(10, float64(p)) {
		n++
	}
	return n
}

// Sign words of PostgreSQL's binary numeric.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
)

// numericUnscaled reads a binary numeric as sign and magnitude of
// value × 10^scale. It fails, rather than rounds, when a digit would be lost
// or the value needs more than prec digits.
func numericUnscaled(b []byte, scale, prec int) (neg bool, mag u128, err error) {
	if len(b) < 8 {
		return false, mag, fmt.Errorf("numeric header is %d bytes", len(b))
	}
	ndigits := int(int16(binary.BigEndian.Uint16(b)))
	weight := int(int16(binary.BigEndian.Uint16(b[2:])))
	sign := binary.BigEndian.Uint16(b[4:])
	switch sign {
	case numericPos:
	case numericNeg:
		neg = true
	case numericNaN:
		return false, mag, fmt.Errorf("NaN has no DECIMAL form")
	case numericPInf, numericNInf:
		return false, mag, fmt.Errorf("infinity has no DECIMAL form")
	default:
		return false, mag, fmt.Errorf("numeric sign 0x%x is unknown", sign)
	}
	if len(b) != 8+2*ndigits {
		return false, mag, fmt.Errorf("numeric of %d digits is %d bytes", ndigits, len(b))
	}
	// Horner over base-10000 digit groups, stopping at 10^-scale; exp is the
	// decimal exponent of mag's unit.
	exp := -scale
	ok := true
	for i := 0; i < ndigits; i++ {
		d := uint64(binary.BigEndian.Uint16(b[8+2*i:]))
		e := 4 * (weight - i)
		switch {
		case e+scale >= 0:
			mag, ok = mag.mulAdd(10000, d)
			exp = e
		case e+scale > -4:
			k := -(e + scale)
			if d%pow10u64[k] != 0 {
				return false, mag, fmt.Errorf("value has more than %d decimal places", scale)
			}
			mag, ok = mag.mulAdd(pow10u64[4-k], d/pow10u64[k])
			exp = -scale
		default:
			if d != 0 {
				return false, mag, fmt.Errorf("value has more than %d decimal places", scale)
			}
		}
		if !ok {
			return false, mag, fmt.Errorf("value exceeds %d digits", prec)
		}
	}
	for shift := exp + scale; shift > 0; {
		k := min(shift, 19)
		if mag, ok = mag.mulAdd(pow10u64[k], 0); !ok {
			return false, mag, fmt.Errorf("value exceeds %d digits", prec)
		}
		shift -= k
	}
	if !mag.less(pow10u[prec]) {
		return false, mag, fmt.Errorf("value exceeds %d digits", prec)
	}
	return neg, mag, nil
}

func decodeDecimal(a *arena, c *column, b []byte) (parquet.Value, error) {
	neg, mag, err := numericUnscaled(b, c.scale, c.prec)
	if err != nil {
		return parquet.Value{}, fmt.Errorf("decode column %q as DECIMAL(%d,%d): %w; "+
			"select it as text (e.g. %q::text in a source_query) and run with --full-refresh",
			c.name, c.prec, c.scale, err, c.name)
	}
	switch c.enc {
	case encDecimal32:
		v := int32(mag.lo) // < 10^9
		if neg {
			v = -v
		}
		return parquet.Int32Value(v), nil
	case encDecimal64:
		v := int64(mag.lo) // < 10^18
		if neg {
			v = -v
		}
		return parquet.Int64Value(v), nil
	}
	hi, lo := mag.hi, mag.lo
	if neg { // two's complement
		var c uint64
		lo, c = bits.Add64(^lo, 1, 0)
		hi, _ = bits.Add64(^hi, 0, c)
	}
	var full [16]byte
	binary.BigEndian.PutUint64(full[:8], hi)
	binary.BigEndian.PutUint64(full[8:], lo)
	return parquet.FixedLenByteArrayValue(a.copy(full[16-c.flba:])), nil
}
