package reconcile

import (
	"encoding/binary"
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
		key = appendValue(key, &v)
	}
	got, err := decodeKey(key, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(appendValue(nil, &got[i])) != string(appendValue(nil, &v)) || got[i].Kind() != v.Kind() && !v.IsNull() {
			t.Errorf("value %d: wrote %v, read %v", i, v, got[i])
		}
	}
	for _, v := range vals {
		b := appendValue(nil, &v)
		for n := range len(b) {
			if _, _, err := readValue(b[:n]); err == nil && n < len(b) && !(v.IsNull() && n == 1) {
				t.Errorf("%v cut to %d of %d bytes: read without an error", v, n, len(b))
			}
		}
	}
}

// TestRecordRoundTrip reads back every record as it was spilled, with and
// without the fields that are left out when zero, and refuses a
// truncated one.
func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []record{
		{key: []byte{1, 2}},
		{flags: flagModNull | flagDeleted, mod: math.MinInt64, key: []byte("k")},
		{flags: byte(kindChanged) << 4, mod: -1, version: 1_764_000_000_000_000, ordinal: 3<<36 | 12345, hash: [hashLen]byte{1, 15: 2}, key: []byte{9}},
		{mod: 7, ordinal: 1},
		{mod: 7, version: -5},
	} {
		b := r.append(nil)
		l, n := binary.Uvarint(b)
		if n <= 0 || int(l) != len(b)-n {
			t.Fatalf("%+v: length %d of %d bytes", r, l, len(b)-n)
		}
		got := record{mod: 99, version: 99, ordinal: 99} // parsed over, as in a reused slice
		if err := parseRecord(&got, b[n:]); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got.flags != r.flags || got.mod != r.mod || got.version != r.version || got.ordinal != r.ordinal || got.hash != r.hash || string(got.key) != string(r.key) {
			t.Errorf("wrote %+v, read %+v", r, got)
		}
		for cut := n; cut < len(b)-len(r.key); cut++ {
			if err := parseRecord(&record{}, b[n:cut]); err == nil {
				t.Errorf("%+v cut to %d bytes: read without an error", r, cut-n)
			}
		}
	}
}
