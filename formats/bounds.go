package formats

import (
	"bytes"
	"unicode/utf8"
)

// statsPrefix is the most bytes of a value kept in a min or max statistic,
// parquet-mr's default for column indexes. One 50 MB value used to be copied
// whole into the page header, the column index and the footer; now a
// statistic costs at most this.
const statsPrefix = 64

// bounds are the statistics of one BYTE_ARRAY column chunk, as valid
// bounds of at most statsPrefix (+4 for a rounded-up code point) bytes. A
// truncated min is a prefix, which sorts at or before the value; a
// truncated max is rounded up to sort after every value with that prefix,
// or both are left out when it cannot be (all 0xFF bytes). Parquet orders both
// STRING and plain BYTE_ARRAY as unsigned bytes, and UTF-8's byte order is
// its code point order, so a STRING is cut and rounded by code points and
// stays valid UTF-8 for readers that decode its statistics.
type bounds struct {
	utf8     bool
	any      bool
	min, max []byte
	noMax    bool // some value's max could not be bounded
}

func (b *bounds) add(v []byte) {
	lo := v
	if len(lo) > statsPrefix {
		lo = cut(v, b.utf8)
	}
	if !b.any || bytes.Compare(lo, b.min) < 0 {
		b.min = append(b.min[:0], lo...)
	}
	if !b.noMax {
		hi := v
		if len(hi) > statsPrefix {
			hi = roundUp(cut(v, b.utf8), b.utf8)
		}
		switch {
		case hi == nil:
			b.noMax, b.max = true, nil
		case !b.any || bytes.Compare(hi, b.max) > 0:
			b.max = append(b.max[:0], hi...)
		}
	}
	b.any = true
}

// result returns the min and max to record, or neither: a min without a
// max is read by arrow-go as a max of "", which would prune every row.
func (b *bounds) result() (min, max []byte) {
	if !b.any || b.noMax {
		return nil, nil
	}
	return append([]byte{}, b.min...), append([]byte{}, b.max...)
}

// cut returns v's first statsPrefix bytes, for UTF-8 without splitting a
// code point.
func cut(v []byte, text bool) []byte {
	p := v[:statsPrefix]
	if text && utf8.Valid(v[:min(len(v), statsPrefix+utf8.UTFMax)]) {
		for len(p) > 0 && !utf8.RuneStart(v[len(p)]) {
			p = p[:len(p)-1]
		}
	}
	return p
}

// roundUp returns the least value of at most len(p) units that sorts after
// every value starting with p: p's last unit that can grow, grown by one,
// with what follows it dropped. nil when every unit is at its maximum.
func roundUp(p []byte, text bool) []byte {
	out := append([]byte{}, p...)
	if text && utf8.Valid(out) {
		for len(out) > 0 {
			r, size := utf8.DecodeLastRune(out)
			out = out[:len(out)-size]
			switch {
			case r == utf8.MaxRune:
				continue
			case r == 0xD7FF: // the next scalar value skips the surrogates
				return utf8.AppendRune(out, 0xE000)
			}
			return utf8.AppendRune(out, r+1)
		}
		return nil
	}
	for len(out) > 0 {
		if last := out[len(out)-1]; last < 0xFF {
			out[len(out)-1] = last + 1
			return out
		}
		out = out[:len(out)-1]
	}
	return nil
}
