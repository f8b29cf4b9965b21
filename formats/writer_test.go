package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
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

// TestRowGroupsApartOpen: row groups encoded apart (BeginRowGroup, several
// in flight at once) and committed in order go through the same footer
// rewrite as the file's own: parquet-go's reader, page indexes included,
// opens the file, and every row group's BYTE_ARRAY statistics are its own.
func TestRowGroupsApartOpen(t *testing.T) {
	m, err := NewMapping([]Column{{Name: "id", TypeOID: oidInt8}, {Name: "s", TypeOID: oidText}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fw, err := NewFileWriter(&out, m.Schema(), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const groups, perGroup = 4, 3000
	id := make([]byte, 8)
	rgs := make([]*RowGroup, groups)
	// Begin every row group before the first is committed, as dedupe's
	// encoders do, and fill them out of order.
	for g := range rgs {
		rgs[g] = BeginRowGroup(fw)
	}
	for _, g := range []int{2, 0, 3, 1} {
		var rows []parquet.Row
		for i := range perGroup {
			binary.BigEndian.PutUint64(id, uint64(g*perGroup+i))
			r, err := m.AppendRow(nil, [][]byte{id, fmt.Appendf(nil, "g%d-%05d", g, i)}, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		if _, err := rgs[g].WriteRows(rows); err != nil {
			t.Fatal(err)
		}
		if err := rgs[g].Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, rg := range rgs {
		if err := rg.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatalf("parquet-go cannot open the file: %v", err)
	}
	if len(pf.RowGroups()) != groups {
		t.Fatalf("%d row groups, want %d", len(pf.RowGroups()), groups)
	}
	sCol := -1
	for i, c := range pf.Schema().Columns() {
		if c[0] == "s" {
			sCol = i
		}
	}
	for g, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			if _, err := cc.OffsetIndex(); err != nil {
				t.Fatalf("row group %d column %d: offset index: %v", g, cc.Column(), err)
			}
		}
		st := pf.Metadata().RowGroups[g].Columns[sCol].MetaData.Statistics
		lo, hi := fmt.Sprintf("g%d-%05d", g, 0), fmt.Sprintf("g%d-%05d", g, perGroup-1)
		if string(st.MinValue) != lo || string(st.MaxValue) != hi {
			t.Errorf("row group %d: s in [%q, %q], want [%q, %q]", g, st.MinValue, st.MaxValue, lo, hi)
		}
		rows := make([]parquet.Row, perGroup+1)
		r := rg.Rows()
		n, err := r.ReadRows(rows)
		r.Close()
		if n != perGroup || err != nil && err != io.EOF {
			t.Fatalf("row group %d: read %d rows (%v), want %d", g, n, err, perGroup)
		}
		if got := rows[0][sCol].String(); got != lo {
			t.Errorf("row group %d begins with %q, want %q", g, got, lo)
		}
	}
}
