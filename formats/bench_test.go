package formats

import (
	"encoding/binary"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// BenchmarkAppendRow measures the per-row cost of decoding; it should show
// no allocation per value beyond the amortised arena blocks.
func BenchmarkAppendRow(b *testing.B) {
	m, err := NewMapping([]Column{
		{Name: "id", TypeOID: oidInt8},
		{Name: "s", TypeOID: oidText},
		{Name: "n", TypeOID: oidNumeric, Typmod: 12<<16 | 2 + 4},
		{Name: "ts", TypeOID: oidTimestamptz},
		{Name: "u", TypeOID: oidUUID},
	}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	id := binary.BigEndian.AppendUint64(nil, 123456789)
	num := []byte{0, 3, 0, 1, 0, 0, 0, 2, 0, 12, 13, 68, 13, 172} // 123456.35
	ts := binary.BigEndian.AppendUint64(nil, 7e14)
	u := make([]byte, 16)
	values := [][]byte{id, []byte("some text value"), num, ts, u}
	var row parquet.Row
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		row, err = m.AppendRow(row, values, 1, false)
		if err != nil {
			b.Fatal(err)
		}
	}
}
