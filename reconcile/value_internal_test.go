package reconcile

import (
	"math"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// TestValueRoundTrip reads back every kind of value appendValue writes,
// bit for bit, and refuses every truncation of it.
func TestValueRoundTrip(t *testing.T) {
	vals := []parquet.Value{{}, parquet.BooleanValue(false), parquet.BooleanValue(true), parquet.Int32Value(-7), parquet.Int64Value(math.MinInt64),
		parquet.Int96Value(deprecated.Int96{1, 2, 3}), parquet.FloatValue(float32(math.Copysign(0, -1))), parquet.DoubleValue(math.NaN()),
		parquet.ByteArrayValue([]byte("it's")), parquet.ByteArrayValue([]byte{}), parquet.FixedLenByteArrayValue([]byte{0, 1, 2, 3})}
	var key []byte
	for _, v := range vals {
		key = appendValue(key, v)
	}
	got, err := decodeKey(key, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(appendValue(nil, got[i])) != string(appendValue(nil, v)) || got[i].Kind() != v.Kind() && !v.IsNull() {
			t.Errorf("value %d: wrote %v, read %v", i, v, got[i])
		}
	}
	for _, v := range vals {
		b := appendValue(nil, v)
		for n := range len(b) {
			if _, _, err := readValue(b[:n]); err == nil && n < len(b) && !(v.IsNull() && n == 1) {
				t.Errorf("%v cut to %d of %d bytes: read without an error", v, n, len(b))
			}
		}
	}
}
