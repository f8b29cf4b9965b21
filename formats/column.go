package formats

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// RawValue reports whether AppendRow writes a present value of column col
// as its binary wire bytes themselves, unchanged, as a value of kind kind
// (width bytes for a number; a byte array of any length has width 0). A
// caller that only compares values (reconcile's hash) may then take the
// wire bytes as they are instead of converting them. It is false for a
// list and for every conversion (dates, timestamps, decimals, text forms).
func (m *Mapping) RawValue(col int) (kind parquet.Kind, width int, raw bool) {
	c := &m.cols[col]
	if c.list {
		return 0, 0, false
	}
	switch c.enc {
	case encInt32:
		return parquet.Int32, 4, true
	case encInt64:
		return parquet.Int64, 8, true
	case encFloat32:
		return parquet.Float, 4, true
	case encFloat64:
		return parquet.Double, 8, true
	case encText, encBytes:
		return parquet.ByteArray, 0, true
	case encUUIDBytes:
		return parquet.FixedLenByteArray, 16, true
	}
	return 0, 0, false
}

// Value converts the binary wire value b (not NULL) of column col, which
// is not a list, into the value AppendRow writes for it; AppendRow gives
// it repetition level 0 and definition level 1.
func (m *Mapping) Value(col int, b []byte) (parquet.Value, error) {
	c := &m.cols[col]
	if c.list {
		return parquet.Value{}, fmt.Errorf("decode column %q: a list has no single value", c.name)
	}
	return decode(&m.arena, c, b)
}

// AppendColumn appends to dst the values, with their levels, that
// AppendRow writes for column col given its binary wire value b (nil is
// NULL): one value, or a list's elements.
func (m *Mapping) AppendColumn(dst parquet.Row, col int, b []byte) (parquet.Row, error) {
	c := &m.cols[col]
	switch {
	case c.list:
		return appendList(dst, &m.arena, c, col, b)
	case b == nil:
		return append(dst, parquet.Value{}.Level(0, 0, col)), nil
	}
	v, err := decode(&m.arena, c, b)
	if err != nil {
		return dst, err
	}
	return append(dst, v.Level(0, 1, col)), nil
}
