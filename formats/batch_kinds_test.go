package formats

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// kindColumns hold a column of every physical kind and every decoding a
// batch keeps: INT32 (int2, int4, date, a small DECIMAL), INT64 (oid,
// time), FLOAT, DOUBLE, BYTE_ARRAY (bytea, and the text forms of time,
// timetz, interval and uuid), FIXED_LEN_BYTE_ARRAY (a wide DECIMAL, uuid).
var kindColumns = []Column{
	{Name: "i2", TypeOID: oidInt2},
	{Name: "i4", TypeOID: oidInt4},
	{Name: "o", TypeOID: oidOID},
	{Name: "f4", TypeOID: oidFloat4},
	{Name: "f8", TypeOID: oidFloat8},
	{Name: "d", TypeOID: oidDate},
	{Name: "by", TypeOID: oidBytea},
	{Name: "n5", TypeOID: oidNumeric, Typmod: 5<<16 | 2 + 4},
	{Name: "n30", TypeOID: oidNumeric, Typmod: 30<<16 | 4 + 4},
	{Name: "u", TypeOID: oidUUID},
	{Name: "tm", TypeOID: oidTime},
	{Name: "tz", TypeOID: oidTimetz},
	{Name: "iv", TypeOID: oidInterval},
}

// kindRow makes the wire values of row i of kindColumns: edge values among
// them (NaN, -0, infinite dates), a NULL in about a tenth of each column,
// and now and then a bytea too large for the arena's blocks.
func kindRow(rng *rand.Rand, i int) [][]byte {
	be := binary.BigEndian
	v := make([][]byte, len(kindColumns))
	v[0] = be.AppendUint16(nil, uint16(rng.Uint32()))
	v[1] = be.AppendUint32(nil, rng.Uint32())
	v[2] = be.AppendUint32(nil, rng.Uint32())
	f4 := []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), float32(math.Inf(1)), rng.Float32() * 1e6}
	v[3] = be.AppendUint32(nil, math.Float32bits(f4[rng.IntN(len(f4))]))
	f8 := []float64{math.NaN(), math.Copysign(0, -1), math.Inf(-1), rng.NormFloat64() * 1e9}
	v[4] = be.AppendUint64(nil, math.Float64bits(f8[rng.IntN(len(f8))]))
	days := []int32{math.MaxInt32, math.MinInt32, int32(rng.IntN(20000)) - 10000}
	v[5] = be.AppendUint32(nil, uint32(days[rng.IntN(len(days))]))
	n := rng.IntN(200)
	if rng.IntN(300) == 0 {
		n = arenaBlock/4 + 1 + rng.IntN(arenaBlock)
	}
	by := make([]byte, n)
	for j := range by {
		by[j] = byte(rng.Uint32())
	}
	v[6] = by
	// numeric: two base-10000 digits, the units then the fraction, and a
	// sign.
	sign := uint16(0)
	if rng.IntN(2) == 0 {
		sign = 0x4000
	}
	v[7] = be.AppendUint16(be.AppendUint16([]byte{0, 2, 0, 0}, sign), 2)
	v[7] = be.AppendUint16(be.AppendUint16(v[7], uint16(rng.IntN(1000))), uint16(rng.IntN(100)*100))
	v[8] = be.AppendUint16(be.AppendUint16([]byte{0, 2, 0, 0}, sign), 4)
	v[8] = be.AppendUint16(be.AppendUint16(v[8], uint16(rng.IntN(10000))), uint16(rng.IntN(10000)))
	v[9] = be.AppendUint64(be.AppendUint64(nil, rng.Uint64()), rng.Uint64())
	us := uint64(rng.Int64N(86400e6))
	v[10] = be.AppendUint64(nil, us)
	v[11] = be.AppendUint32(be.AppendUint64(nil, us), uint32(int32(rng.IntN(2*50400)-50400)))
	v[12] = be.AppendUint32(be.AppendUint32(be.AppendUint64(nil, uint64(rng.Int64N(1e12))), uint32(rng.IntN(40))), uint32(rng.IntN(30)))
	for j := range v {
		if rng.IntN(10) == 0 {
			v[j] = nil
		}
	}
	return v
}

// TestBatchWritesTheSameFileOfEveryKind is TestBatchWritesTheSameFile over
// every physical kind and decoding, with the options that change the
// Parquet types of uuid and time and without them: the files written from
// batches and from rows must be the same bytes.
func TestBatchWritesTheSameFileOfEveryKind(t *testing.T) {
	for _, o := range []Options{{}, {UUIDLogical: true, TimeAsParquetTime: true}} {
		m, err := NewMapping(kindColumns, o)
		if err != nil {
			t.Fatal(err)
		}
		tw := newTwinFiles(t, m, WriterOptions{RowGroupRows: 5000, RowGroupBytes: 1 << 20})
		rng := rand.New(rand.NewPCG(5, 6))
		for i := 0; i < 20_000; {
			for range 1 + rng.IntN(1100) {
				v := kindRow(rng, i)
				i++
				tw.add(v, int64(i), rng.IntN(9) == 0)
			}
			tw.flush()
		}
		tw.close(nil)
		if n := len(tw.batchFile().RowGroups()); n < 3 {
			t.Fatalf("%+v: %d row groups: the bounds were not exercised", o, n)
		}
		if !tw.same() {
			t.Fatalf("%+v: the file written from batches (%d bytes) differs from the one written from rows (%d bytes)", o, tw.byBatch.Len(), tw.byRow.Len())
		}
	}
}
