package formats

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// SparkVersionKey is always written: with it, Spark 3 reads dates and
// timestamps before 1582 as proleptic Gregorian, as PostgreSQL wrote them,
// instead of rebasing them from the Julian calendar.
const (
	SparkVersionKey   = "org.apache.spark.version"
	SparkVersionValue = "3.5.0"
)

type fileWriter struct {
	w        *parquet.GenericWriter[any]
	maxRows  int64
	rows     int64 // in the current row group
	baseSize int64 // w.Size() when the current row group began
	closed   bool
}

func newFileWriter(w io.Writer, m Mapping, opts WriterOptions) (FileWriter, error) {
	codec := opts.Codec
	if codec == nil {
		var err error
		if codec, err = NewCodec(opts.Compression); err != nil {
			return nil, fmt.Errorf("create parquet writer: %w", err)
		}
	}
	options := []parquet.WriterOption{
		m.Schema(),
		parquet.Compression(codec),
		opts.Build.CreatedBy(),
		parquet.KeyValueMetadata(SparkVersionKey, SparkVersionValue),
	}
	for k, v := range opts.KeyValue {
		options = append(options, parquet.KeyValueMetadata(k, v))
	}
	cfg, err := parquet.NewWriterConfig(options...)
	if err != nil {
		return nil, fmt.Errorf("create parquet writer: %w", err)
	}
	return &fileWriter{w: parquet.NewGenericWriter[any](w, cfg), maxRows: opts.RowGroupRows}, nil
}

// WriteRows splits at RowGroupRows itself rather than through parquet-go's
// MaxRowsPerRowGroup, so that BufferedBytes always knows where the current
// row group began.
func (f *fileWriter) WriteRows(rows []parquet.Row) (int, error) {
	written := 0
	for len(rows) > 0 {
		batch := rows
		if f.maxRows > 0 && int64(len(batch)) > f.maxRows-f.rows {
			batch = rows[:f.maxRows-f.rows]
		}
		n, err := f.w.WriteRows(batch)
		written += n
		f.rows += int64(n)
		if err != nil {
			return written, fmt.Errorf("write parquet rows: %w", err)
		}
		rows = rows[n:]
		if f.maxRows > 0 && f.rows >= f.maxRows {
			if err := f.Flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (f *fileWriter) Flush() error {
	if f.rows == 0 {
		return nil
	}
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("flush parquet row group: %w", err)
	}
	f.rows = 0
	f.baseSize = f.w.Size()
	return nil
}

// BufferedBytes is an upper bound: values not yet in a page are counted
// uncompressed.
func (f *fileWriter) BufferedBytes() int64 {
	if f.rows == 0 {
		return 0
	}
	return f.w.Size() - f.baseSize
}

func (f *fileWriter) SetKeyValue(key, value string) {
	f.w.SetKeyValueMetadata(key, value)
}

func (f *fileWriter) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if err := f.w.Close(); err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	return nil
}
