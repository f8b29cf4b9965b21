package formats

import (
	"encoding/binary"
	"io"
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

// benchRows are the wire values of rows shaped like bench/export's table.
func benchRows(n int) (*Mapping, [][][]byte, error) {
	m, err := NewMapping([]Column{
		{Name: "id", TypeOID: oidInt8},
		{Name: "updated_at", TypeOID: oidTimestamptz},
		{Name: "payload", TypeOID: oidText},
		{Name: "amount", TypeOID: oidNumeric, Typmod: 12<<16 | 2 + 4},
	}, Options{})
	rows := make([][][]byte, n)
	for i := range rows {
		payload := []byte("0123456789abcdef0123456789abcdef0123456789abcdef01")
		payload[i%50] = 'x'
		rows[i] = [][]byte{
			binary.BigEndian.AppendUint64(nil, uint64(i)),
			binary.BigEndian.AppendUint64(nil, uint64(7e14+i*10000)),
			payload,
			{0, 3, 0, 1, 0, 0, 0, 2, 0, 12, byte(i), 68, 13, 172},
		}
	}
	return m, rows, err
}

// BenchmarkWriteRows and BenchmarkWriteBatch compare the two ways from
// wire values to a zstd file, per row, in batches of 1024 as the exporter
// makes them.
func BenchmarkWriteRows(b *testing.B) {
	m, src, err := benchRows(1024)
	if err != nil {
		b.Fatal(err)
	}
	fw, err := NewFileWriter(io.Discard, m.Schema(), WriterOptions{RowGroupBytes: 32 << 20})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]parquet.Row, len(src))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := i % len(src)
		if rows[r], err = m.AppendRow(rows[r], src[r], 1, false); err != nil {
			b.Fatal(err)
		}
		if r == len(src)-1 {
			if err := fw.Write(rows, 1024*100); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkWriteBatch(b *testing.B) {
	m, src, err := benchRows(1024)
	if err != nil {
		b.Fatal(err)
	}
	fw, err := NewFileWriter(io.Discard, m.Schema(), WriterOptions{RowGroupBytes: 32 << 20})
	if err != nil {
		b.Fatal(err)
	}
	batch := m.NewBatch()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := i % len(src)
		if err := m.AppendBatch(batch, src[r], 1, false); err != nil {
			b.Fatal(err)
		}
		if r == len(src)-1 {
			if err := fw.WriteBatch(batch, 1024*100); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
		}
	}
}

// BenchmarkAppendBatch measures the reader's share alone: decoding rows
// shaped like bench/export's table into a batch.
func BenchmarkAppendBatch(b *testing.B) {
	m, src, err := benchRows(1024)
	if err != nil {
		b.Fatal(err)
	}
	batch := m.NewBatch()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := i % len(src)
		if r == 0 {
			batch.Reset()
		}
		if err := m.AppendBatch(batch, src[r], 1, false); err != nil {
			b.Fatal(err)
		}
	}
}
