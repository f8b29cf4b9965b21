package formats

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// batchColumns are the kinds of column a batch keeps apart: fixed-width,
// BYTE_ARRAY with statistics, DECIMAL, FIXED_LEN_BYTE_ARRAY and a LIST.
var batchColumns = []Column{
	{Name: "id", TypeOID: oidInt8},
	{Name: "s", TypeOID: oidText},
	{Name: "n", TypeOID: oidNumeric, Typmod: 12<<16 | 2 + 4},
	{Name: "ts", TypeOID: oidTimestamptz},
	{Name: "u", TypeOID: oidUUID},
	{Name: "a", TypeOID: 1007, ElemOID: oidInt4},
	{Name: "b", TypeOID: oidBool},
}

// batchRow makes the wire values of row i: about a tenth of each column
// NULL, texts of 0-300 bytes, arrays of 0-5 elements with NULL elements.
func batchRow(rng *rand.Rand, i int) [][]byte {
	v := make([][]byte, len(batchColumns))
	v[0] = binary.BigEndian.AppendUint64(nil, uint64(i))
	s := make([]byte, rng.IntN(300))
	for j := range s {
		s[j] = 'a' + byte(rng.IntN(26))
	}
	v[1] = s
	// numeric: two base-10000 digits, the units then the fraction, scale 2.
	v[2] = binary.BigEndian.AppendUint16([]byte{0, 2, 0, 0, 0, 0, 0, 2}, uint16(rng.IntN(10000)))
	v[2] = binary.BigEndian.AppendUint16(v[2], uint16(rng.IntN(100)*100))
	v[3] = binary.BigEndian.AppendUint64(nil, uint64(7e14)+uint64(i))
	v[4] = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, rng.Uint64()), rng.Uint64())
	n := rng.IntN(6)
	if n == 0 {
		v[5] = binary.BigEndian.AppendUint32(make([]byte, 0, 12), 0)
		v[5] = append(v[5], 0, 0, 0, 0, 0, 0, 0, 23)
	} else {
		a := []byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 23}
		a = binary.BigEndian.AppendUint32(a, uint32(n))
		a = binary.BigEndian.AppendUint32(a, 1)
		for range n {
			if rng.IntN(4) == 0 {
				a = binary.BigEndian.AppendUint32(a, 0xffffffff)
				continue
			}
			a = binary.BigEndian.AppendUint32(a, 4)
			a = binary.BigEndian.AppendUint32(a, rng.Uint32())
		}
		v[5] = a
	}
	v[6] = []byte{byte(rng.IntN(2))}
	for j := range v {
		if j > 0 && rng.IntN(10) == 0 {
			v[j] = nil
		}
	}
	return v
}

// TestBatchWritesTheSameFile writes the same rows through AppendRow and
// Write and through one reused batch, AppendBatch and WriteBatch, in
// batches of every size from 1 to 1500 rows, into row groups bounded by
// rows (which splits batches) and by raw bytes, over many pages per
// column chunk, with tombstones and rows that fail to decode: the files
// must be the same bytes.
func TestBatchWritesTheSameFile(t *testing.T) {
	m, err := NewMapping(batchColumns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tw := newTwinFiles(t, m, WriterOptions{RowGroupRows: 7000, RowGroupBytes: 1 << 20, KeyValue: map[string]string{"k": "v"}})
	rng := rand.New(rand.NewPCG(3, 4))
	failed := 0
	for i := 0; i < 40_000; {
		size := 1 + rng.IntN(1500)
		for range size {
			v := batchRow(rng, i)
			i++
			if rng.IntN(500) == 0 {
				// A value of the wrong width, after others were appended.
				v[3] = make([]byte, 7)
				if err := m.AppendBatch(tw.b, v, int64(i), false); err == nil {
					t.Fatal("a timestamp of 7 bytes was accepted")
				}
				failed++
				continue
			}
			tw.add(v, int64(i), rng.IntN(7) == 0)
		}
		tw.flush()
	}
	if failed == 0 {
		t.Fatal("no row failed to decode")
	}
	tw.close(func(w *FileWriter) { w.SetKeyValue("last", "x") })
	pf := tw.batchFile()
	groups := pf.RowGroups()
	if len(groups) < 6 {
		t.Fatalf("%d row groups: the bounds were not exercised", len(groups))
	}
	if pages := len(pf.OffsetIndexes()[1].PageLocations); pages < 2 {
		t.Fatalf("column s of the first row group has %d pages: page ends were not exercised", pages)
	}
	if !tw.same() {
		t.Fatalf("the file written from batches (%d bytes) differs from the one written from rows (%d bytes)", tw.byBatch.Len(), tw.byRow.Len())
	}
}
