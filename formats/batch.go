package formats

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// Batch is a run of rows decoded column by column: for each leaf column of
// the schema, its values with their levels, as FileWriter hands them to
// parquet-go's column writers. Filling it (Mapping.AppendBatch) and
// writing it (FileWriter.WriteBatch) never build a parquet.Row, whose
// shredding into columns was a quarter of the writer's work.
//
// A Batch owns the bytes of its BYTE_ARRAY values, in blocks that Reset
// hands out again: refill it only once WriteBatch has returned. It is
// used by one goroutine at a time.
type Batch struct {
	cols [][]parquet.Value
	// starts holds, for each LIST column, the index in cols of each row's
	// first value, and one past the last row's; nil for other columns.
	starts [][]int32
	rows   int
	arena  arena
	// null holds each column's NULL, levels set; version and deleted the
	// values of the last two columns last appended. AppendBatch copies
	// them rather than setting the levels of each row's values anew.
	null    []parquet.Value
	version parquet.Value
	deleted [2]parquet.Value
}

// NewBatch returns an empty batch of the mapping's schema.
func (m *Mapping) NewBatch() *Batch {
	n := len(m.cols)
	b := &Batch{cols: make([][]parquet.Value, n+2), starts: make([][]int32, n+2), arena: arena{reuse: true},
		null: make([]parquet.Value, n), version: parquet.Int64Value(0).Level(0, 0, n),
		deleted: [2]parquet.Value{parquet.BooleanValue(false).Level(0, 0, n+1), parquet.BooleanValue(true).Level(0, 0, n+1)}}
	for i := range m.cols {
		b.null[i] = parquet.Value{}.Level(0, 0, i)
		if m.cols[i].list {
			b.starts[i] = []int32{0}
		}
	}
	return b
}

// Len is the number of rows in the batch.
func (b *Batch) Len() int { return b.rows }

// Reset empties the batch, keeping its memory but for values too large for
// the arena, which it lets go: a batch that once held a 50 MiB value must
// not keep it.
func (b *Batch) Reset() {
	// The values of the arena's blocks may stay behind the columns'
	// lengths, since the blocks are kept; clearing them costs as much as
	// writing them. Only a value made on its own must not be kept alive.
	loose := b.arena.loose
	for i := range b.cols {
		if loose {
			// To the capacity: a row that failed leaves its values
			// past the length.
			clear(b.cols[i][:cap(b.cols[i])])
		}
		b.cols[i] = b.cols[i][:0]
		if b.starts[i] != nil {
			b.starts[i] = b.starts[i][:1]
		}
	}
	b.rows = 0
	b.arena.reset()
}

// span is where the values of rows [from, to) of column i lie in cols[i].
func (b *Batch) span(i, from, to int) (int, int) {
	if s := b.starts[i]; s != nil {
		return int(s[from]), int(s[to])
	}
	return from, to
}

// AppendBatch converts one source row as AppendRow does, with the same
// arguments, and appends it to b, which the mapping made. A row that fails
// leaves b as it was.
func (m *Mapping) AppendBatch(b *Batch, values [][]byte, version int64, deleted bool) error {
	if len(values) != len(m.cols) {
		return fmt.Errorf("append row: got %d values for %d columns", len(values), len(m.cols))
	}
	if len(b.cols) != len(m.cols)+2 {
		return fmt.Errorf("append row: a batch of %d columns for a mapping of %d", len(b.cols), len(m.cols)+2)
	}
	for i := range m.cols {
		c := &m.cols[i]
		v := values[i]
		var err error
		switch {
		case c.list:
			b.cols[i], err = appendList(b.cols[i], &b.arena, c, i, v)
			if err == nil {
				b.starts[i] = append(b.starts[i], int32(len(b.cols[i])))
			}
		case v == nil:
			b.cols[i] = append(b.cols[i], b.null[i])
		default:
			var pv parquet.Value
			if pv, err = decode(&b.arena, c, v); err == nil {
				// Level's call and its copies of the value cost more
				// than the decoding of most types; the setters inline.
				pv.SetDefinitionLevel(1)
				pv.SetColumnIndex(i)
				b.cols[i] = append(b.cols[i], pv)
			}
		}
		if err != nil {
			b.truncate(i)
			return err
		}
	}
	n := len(m.cols)
	if b.version.Int64() != version {
		b.version = parquet.Int64Value(version).Level(0, 0, n)
	}
	b.cols[n] = append(b.cols[n], b.version)
	d := 0
	if deleted {
		d = 1
	}
	b.cols[n+1] = append(b.cols[n+1], b.deleted[d])
	b.rows++
	return nil
}

// truncate drops what columns [0, last] hold of a row that failed, and
// the end that a LIST column before last recorded for it. Its bytes stay
// in the arena until Reset.
func (b *Batch) truncate(last int) {
	for i := 0; i <= last; i++ {
		from, _ := b.span(i, b.rows, b.rows)
		b.cols[i] = b.cols[i][:from]
		if b.starts[i] != nil {
			b.starts[i] = b.starts[i][:b.rows+1]
		}
	}
}

// writeChunk is the most rows given to a column writer at once, as
// parquet-go's own WriteRows does: a page ends after the write that fills
// it, so writing the same chunks makes the same pages, and the files
// written from batches and from rows are the same bytes.
const writeChunk = 64

// WriteBatch adds the rows of a batch whose raw size, as the caller
// measures it, is raw, by Write's rule: the row group ends at
// RowGroupRows, or after the batch once the rows or raw bytes given since
// it began reach RowGroupRows or RowGroupBytes. The batch may be refilled
// once it returns.
func (f *FileWriter) WriteBatch(b *Batch, raw int64) error {
	if err := f.writeBatch(b); err != nil {
		return err
	}
	f.openRaw += raw
	f.openRows += int64(b.rows)
	if f.maxRaw > 0 && f.openRaw >= f.maxRaw || f.maxRows > 0 && f.openRows >= f.maxRows {
		return f.Flush()
	}
	return nil
}

func (f *FileWriter) writeBatch(b *Batch) error {
	cols := f.w.ColumnWriters()
	if len(cols) != len(b.cols) {
		return fmt.Errorf("write parquet rows: a batch of %d columns for a schema of %d", len(b.cols), len(cols))
	}
	for from := 0; from < b.rows; {
		to := b.rows
		if f.maxRows > 0 && int64(to-from) > f.maxRows-f.rows {
			to = from + int(f.maxRows-f.rows)
		}
		for lo := from; lo < to; lo += writeChunk {
			hi := min(lo+writeChunk, to)
			for i, c := range cols {
				s, e := b.span(i, lo, hi)
				if _, err := c.WriteRowValues(b.cols[i][s:e]); err != nil {
					return fmt.Errorf("write parquet rows: %w", err)
				}
			}
		}
		f.observeBatch(b, from, to)
		f.rows += int64(to - from)
		from = to
		if f.maxRows > 0 && f.rows >= f.maxRows {
			if err := f.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// observeBatch keeps the statistics of rows [from, to) of the BYTE_ARRAY
// columns, as observe does for rows.
func (f *FileWriter) observeBatch(b *Batch, from, to int) {
	for leaf, j := range f.byteCols {
		s, e := b.span(leaf, from, to)
		for _, v := range b.cols[leaf][s:e] {
			if !v.IsNull() {
				f.open[j].add(v.ByteArray())
			}
		}
	}
}
