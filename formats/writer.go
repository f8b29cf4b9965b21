package formats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// SparkVersionKey is always written: with it, Spark 3 reads dates and
// timestamps before 1582 as proleptic Gregorian, as PostgreSQL wrote them,
// instead of rebasing them from the Julian calendar.
const (
	SparkVersionKey   = "org.apache.spark.version"
	SparkVersionValue = "3.5.0"
)

// FileWriter writes one Parquet file. Besides parquet-go's writer it
// bounds row groups by the raw size of the rows written (Write), predicts
// the file's size for rolling files at a target (EstimatedSize), and keeps
// the statistics of BYTE_ARRAY columns itself.
type FileWriter struct {
	w        *parquet.GenericWriter[any]
	out      *tailWriter
	maxRows  int64
	maxRaw   int64
	rows     int64 // in the current row group
	baseSize int64 // w.Size() when the current row group began
	closed   bool
	// Rows and raw bytes given to Write since it last ended a row group,
	// and the raw bytes of the row groups it ended: with the bytes written
	// they give the compression ratio seen so far.
	openRows, openRaw, flushedRaw int64
	// The statistics of BYTE_ARRAY columns are kept here rather than by
	// parquet-go, which copies every page's whole min and max into page
	// headers, the column index and the footer (see bounds.go).
	byteCols map[int]int // leaf column index -> position in open
	open     []bounds    // of the current row group
	groups   [][]bounds  // of the flushed row groups
	spare    []*RowGroup // committed, to be begun again
}

// NewFileWriter starts a Parquet file of the schema on w: a mapping's
// schema, or one read from earlier files, as compaction rewrites them.
func NewFileWriter(w io.Writer, schema *parquet.Schema, opts WriterOptions) (*FileWriter, error) {
	codec := opts.Codec
	if codec == nil {
		var err error
		if codec, err = NewCodec(opts.Compression); err != nil {
			return nil, fmt.Errorf("create parquet writer: %w", err)
		}
	}
	f := &FileWriter{out: &tailWriter{w: w}, maxRows: opts.RowGroupRows, maxRaw: opts.RowGroupBytes, byteCols: map[int]int{}}
	options := []parquet.WriterOption{
		schema,
		parquet.Compression(codec),
		opts.Build.CreatedBy(),
		parquet.KeyValueMetadata(SparkVersionKey, SparkVersionValue),
		parquet.ColumnIndexSizeLimit(func([]string) int { return statsPrefix }),
	}
	for _, path := range schema.Columns() {
		leaf, _ := schema.Lookup(path...)
		typ := leaf.Node.Type()
		if typ.Kind() != parquet.ByteArray {
			continue
		}
		var text bool
		if lt := typ.LogicalType(); lt != nil {
			_, text = lt.Value.(*format.StringType)
		}
		f.byteCols[leaf.ColumnIndex] = len(f.open)
		f.open = append(f.open, bounds{utf8: text})
		options = append(options, parquet.SkipPageBounds(path...), parquet.SkipPageStatistics(path...))
	}
	for k, v := range opts.KeyValue {
		options = append(options, parquet.KeyValueMetadata(k, v))
	}
	cfg, err := parquet.NewWriterConfig(options...)
	if err != nil {
		return nil, fmt.Errorf("create parquet writer: %w", err)
	}
	f.w = parquet.NewGenericWriter[any](f.out, cfg)
	return f, nil
}

// Write adds a batch of rows whose raw size, as the caller measures it
// (e.g. the bytes read from the source), is raw. After the batch it ends
// the row group if the rows or raw bytes given to Write since it last ended
// one reach RowGroupRows or RowGroupBytes.
func (f *FileWriter) Write(rows []parquet.Row, raw int64) error {
	if _, err := f.WriteRows(rows); err != nil {
		return err
	}
	f.openRaw += raw
	f.openRows += int64(len(rows))
	if f.maxRaw > 0 && f.openRaw >= f.maxRaw || f.maxRows > 0 && f.openRows >= f.maxRows {
		return f.Flush()
	}
	return nil
}

// EstimatedSize predicts the file's size if it were closed now: the bytes
// written so far, plus the raw bytes that Write holds in the open row group
// scaled by the compression of the row groups it ended (half before the
// first). It is the one rule by which files roll at a target size.
func (f *FileWriter) EstimatedSize() int64 {
	ratio := 0.5
	if f.flushedRaw > 0 {
		ratio = float64(f.out.passed) / float64(f.flushedRaw)
	}
	return f.out.passed + int64(float64(f.openRaw)*ratio)
}

// WriteRows buffers rows into the current row group. It splits at
// RowGroupRows itself rather than through parquet-go's MaxRowsPerRowGroup,
// so that BufferedBytes always knows where the current row group began.
func (f *FileWriter) WriteRows(rows []parquet.Row) (int, error) {
	written := 0
	for len(rows) > 0 {
		batch := rows
		if f.maxRows > 0 && int64(len(batch)) > f.maxRows-f.rows {
			batch = rows[:f.maxRows-f.rows]
		}
		n, err := f.w.WriteRows(batch)
		f.observe(batch[:n])
		written += n
		f.rows += int64(n)
		if err != nil {
			return written, fmt.Errorf("write parquet rows: %w", err)
		}
		rows = rows[n:]
		if f.maxRows > 0 && f.rows >= f.maxRows {
			if err := f.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (f *FileWriter) observe(rows []parquet.Row) { f.observeInto(f.open, rows) }

// observeInto adds the BYTE_ARRAY values of rows to the bounds of one row
// group.
func (f *FileWriter) observeInto(open []bounds, rows []parquet.Row) {
	if len(open) == 0 {
		return
	}
	for _, row := range rows {
		for _, v := range row {
			if v.IsNull() {
				continue
			}
			if j, ok := f.byteCols[v.Column()]; ok {
				open[j].add(v.ByteArray())
			}
		}
	}
}

// Flush ends the current row group.
func (f *FileWriter) Flush() error {
	f.flushedRaw += f.openRaw
	f.openRaw, f.openRows = 0, 0
	return f.flush()
}

func (f *FileWriter) flush() error {
	if f.rows == 0 {
		return nil
	}
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("flush parquet row group: %w", err)
	}
	f.endGroup()
	f.baseSize = f.w.Size()
	return nil
}

func (f *FileWriter) endGroup() {
	g := make([]bounds, len(f.open))
	copy(g, f.open)
	f.groups = append(f.groups, g)
	for i := range f.open {
		f.open[i] = bounds{utf8: f.open[i].utf8}
	}
	f.rows = 0
}

// BufferedBytes estimates the bytes held for the current row group. It is
// an upper bound: values not yet in a page are counted uncompressed.
func (f *FileWriter) BufferedBytes() int64 {
	if f.rows == 0 {
		return 0
	}
	return f.w.Size() - f.baseSize
}

// SetKeyValue adds footer metadata; it may be called until Close.
func (f *FileWriter) SetKeyValue(key, value string) {
	f.w.SetKeyValueMetadata(key, value)
}

// Close ends the last row group, then holds back what parquet-go writes
// last (the page indexes and the footer, and at most its write buffer of
// data) to put the BYTE_ARRAY statistics into the footer. It does not
// close the underlying writer.
func (f *FileWriter) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if err := f.flush(); err != nil {
		return err
	}
	f.out.hold = true
	if err := f.w.Close(); err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	tail, err := f.footer(f.out.held.Bytes())
	if err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	if _, err := f.out.w.Write(tail); err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	return nil
}

// footer rewrites the footer at the end of tail with the statistics of the
// BYTE_ARRAY columns. It also drops their column indexes: parquet-go writes
// them with empty bounds once it is told to skip page bounds, and an empty
// max would tell a reader that a page holds nothing above "". The other
// columns keep theirs.
func (f *FileWriter) footer(tail []byte) ([]byte, error) {
	if len(f.open) == 0 {
		return tail, nil
	}
	if len(tail) < 8 || string(tail[len(tail)-4:]) != "PAR1" {
		return nil, fmt.Errorf("rewrite footer: no footer in the last %d bytes", len(tail))
	}
	n := int(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	start := len(tail) - 8 - n
	if start < 0 {
		return nil, fmt.Errorf("rewrite footer: footer of %d bytes does not fit the last %d", n, len(tail))
	}
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), tail[start:len(tail)-8], &md); err != nil {
		return nil, fmt.Errorf("rewrite footer: %w", err)
	}
	if len(md.RowGroups) != len(f.groups) {
		return nil, fmt.Errorf("rewrite footer: %d row groups written, %d counted", len(md.RowGroups), len(f.groups))
	}
	for i := range md.RowGroups {
		cols := md.RowGroups[i].Columns
		for leaf, j := range f.byteCols {
			c := &cols[leaf]
			c.ColumnIndexLength = 0 // dropped; compactPageIndex closes the gap
			st := &c.MetaData.Statistics
			st.Min, st.Max = nil, nil
			st.MinValue, st.MaxValue = f.groups[i][j].result()
		}
	}
	index, err := compactPageIndex(&md, tail[:start], f.out.passed)
	if err != nil {
		return nil, fmt.Errorf("rewrite footer: %w", err)
	}
	b, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return nil, fmt.Errorf("rewrite footer: %w", err)
	}
	out := bytes.NewBuffer(make([]byte, 0, start+len(b)+8))
	out.Write(index)
	out.Write(b)
	out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(b))))
	out.WriteString("PAR1")
	return out.Bytes(), nil
}

// compactPageIndex rewrites the part of the file before its footer, held
// in tail (which starts at file offset base), so that the page indexes the
// metadata still names lie back to back in the order they were written,
// and moves their offsets to match. Column indexes with a length of zero
// are dropped. Readers find each index by its own offset, but parquet-go's
// reads the whole section at once and slices it by offset, so a gap where
// a dropped index was would send it out of bounds.
func compactPageIndex(md *format.FileMetaData, tail []byte, base int64) ([]byte, error) {
	type entry struct {
		offset *int64
		length int64
	}
	var entries []entry
	for i := range md.RowGroups {
		for j := range md.RowGroups[i].Columns {
			c := &md.RowGroups[i].Columns[j]
			if c.ColumnIndexLength == 0 {
				c.ColumnIndexOffset = 0
			} else {
				entries = append(entries, entry{&c.ColumnIndexOffset, int64(c.ColumnIndexLength)})
			}
		}
	}
	for i := range md.RowGroups {
		for j := range md.RowGroups[i].Columns {
			if c := &md.RowGroups[i].Columns[j]; c.OffsetIndexLength > 0 {
				entries = append(entries, entry{&c.OffsetIndexOffset, int64(c.OffsetIndexLength)})
			}
		}
	}
	// parquet-go writes every page index after the last data page, when the
	// file is closed: the section starts at the lowest offset it names.
	first := base + int64(len(tail))
	for i := range md.RowGroups {
		for _, c := range md.RowGroups[i].Columns {
			for _, off := range []int64{c.ColumnIndexOffset, c.OffsetIndexOffset} {
				if off > 0 && off < first {
					first = off
				}
			}
		}
	}
	if first < base {
		return nil, fmt.Errorf("the page index starts at %d, before the %d bytes held back from %d", first, len(tail), base)
	}
	out := bytes.NewBuffer(make([]byte, 0, len(tail)))
	out.Write(tail[:first-base])
	for _, e := range entries {
		from := *e.offset - base
		if from < 0 || from+e.length > int64(len(tail)) {
			return nil, fmt.Errorf("a page index at %d+%d lies outside the %d bytes held back from %d", *e.offset, e.length, len(tail), base)
		}
		*e.offset = base + int64(out.Len())
		out.Write(tail[from : from+e.length])
	}
	return out.Bytes(), nil
}

// tailWriter passes writes through until hold is set, then keeps them.
// passed counts the bytes written through, the file offset of held's
// first byte.
type tailWriter struct {
	w      io.Writer
	hold   bool
	held   bytes.Buffer
	passed int64
}

func (t *tailWriter) Write(b []byte) (int, error) {
	if t.hold {
		return t.held.Write(b)
	}
	n, err := t.w.Write(b)
	t.passed += int64(n)
	return n, err
}
