package formats

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestWriteBoundsAndEstimate: Write ends a row group once the raw bytes
// given to it reach RowGroupBytes, and EstimatedSize, the rule by which
// files roll, is the bytes written wherever a row group has just ended and
// grows with what is buffered in between.
func TestWriteBoundsAndEstimate(t *testing.T) {
	m, err := NewMapping([]Column{{Name: "id", TypeOID: oidInt8}, {Name: "s", TypeOID: oidText}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// Row groups larger than parquet-go's 32 KiB write buffer, so that
	// each one reaches the file when it ends.
	const batches, batchRows, batchRaw = 25, 100, 100 * (12 + 104)
	fw, err := NewFileWriter(&out, m.Schema(), WriterOptions{RowGroupBytes: 10 * batchRaw})
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 8)
	s := make([]byte, 100)
	rng := rand.New(rand.NewPCG(1, 1))
	n := 0
	prev := fw.EstimatedSize()
	for b := range batches {
		var rows []parquet.Row
		for range batchRows {
			binary.BigEndian.PutUint64(id, uint64(n))
			n++
			for i := range s {
				s[i] = 'a' + byte(rng.IntN(26))
			}
			r, err := m.AppendRow(nil, [][]byte{id, s}, int64(n), false)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		if err := fw.Write(rows, batchRaw); err != nil {
			t.Fatal(err)
		}
		est := fw.EstimatedSize()
		ended := (b+1)%10 == 0
		switch {
		case ended && (fw.BufferedBytes() != 0 || est != int64(out.Len())):
			t.Errorf("batch %d ended a row group: buffered %d, estimate %d, written %d", b, fw.BufferedBytes(), est, out.Len())
		case !ended && (fw.BufferedBytes() == 0 || est <= prev):
			t.Errorf("batch %d in an open row group: buffered %d, estimate %d after %d", b, fw.BufferedBytes(), est, prev)
		}
		prev = est
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(out.Bytes()), int64(out.Len()), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, g := range pf.RowGroups() {
		sizes = append(sizes, g.NumRows())
	}
	if len(sizes) != 3 || sizes[0] != 1000 || sizes[1] != 1000 || sizes[2] != 500 {
		t.Errorf("row groups %v, want [1000 1000 500]", sizes)
	}
}
