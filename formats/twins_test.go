package formats

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// twinFiles writes the same rows into two files: from parquet.Rows through
// Write, and from a Batch through WriteBatch. The batch path's contract is
// that both come out the same bytes.
type twinFiles struct {
	t              *testing.T
	m              *Mapping
	b              *Batch // the rows added since the last flush
	rows           []parquet.Row
	raw            int64
	byRow, byBatch bytes.Buffer
	rw, bw         *FileWriter
}

func newTwinFiles(t *testing.T, m *Mapping, opts WriterOptions) *twinFiles {
	t.Helper()
	tw := &twinFiles{t: t, m: m, b: m.NewBatch()}
	var err error
	if tw.rw, err = NewFileWriter(&tw.byRow, m.Schema(), opts); err != nil {
		t.Fatal(err)
	}
	if tw.bw, err = NewFileWriter(&tw.byBatch, m.Schema(), opts); err != nil {
		t.Fatal(err)
	}
	return tw
}

// add appends one row to the batch and to the rows.
func (tw *twinFiles) add(v [][]byte, version int64, deleted bool) {
	tw.t.Helper()
	if err := tw.m.AppendBatch(tw.b, v, version, deleted); err != nil {
		tw.t.Fatal(err)
	}
	r, err := tw.m.AppendRow(nil, v, version, deleted)
	if err != nil {
		tw.t.Fatal(err)
	}
	tw.rows = append(tw.rows, r)
	for _, x := range v {
		tw.raw += int64(len(x)) + 4
	}
}

// flush writes what was added since the last flush to both files.
func (tw *twinFiles) flush() {
	tw.t.Helper()
	if tw.b.Len() != len(tw.rows) {
		tw.t.Fatalf("the batch holds %d rows, want %d", tw.b.Len(), len(tw.rows))
	}
	if err := tw.rw.Write(tw.rows, tw.raw); err != nil {
		tw.t.Fatal(err)
	}
	if err := tw.bw.WriteBatch(tw.b, tw.raw); err != nil {
		tw.t.Fatal(err)
	}
	tw.b.Reset()
	tw.rows, tw.raw = tw.rows[:0], 0
}

// close ends both files, calling last on each first when it is not nil.
func (tw *twinFiles) close(last func(*FileWriter)) {
	tw.t.Helper()
	for _, w := range []*FileWriter{tw.rw, tw.bw} {
		if last != nil {
			last(w)
		}
		if err := w.Close(); err != nil {
			tw.t.Fatal(err)
		}
	}
}

// same reports whether the two files are the same bytes.
func (tw *twinFiles) same() bool { return bytes.Equal(tw.byRow.Bytes(), tw.byBatch.Bytes()) }

// batchFile opens the file written from batches.
func (tw *twinFiles) batchFile() *parquet.File {
	tw.t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(tw.byBatch.Bytes()), int64(tw.byBatch.Len()))
	if err != nil {
		tw.t.Fatal(err)
	}
	return pf
}
