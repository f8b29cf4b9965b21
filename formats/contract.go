package formats

// This file is the contract between the PostgreSQL source (internal/pgsource),
// the exporter (export) and the Parquet side (this package). The bodies are
// filled by the formats work (issue 4).

import (
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// Hidden columns written into every file. Source columns may not use the
// _hw_ prefix (checked at discovery).
const (
	ColVersion = "_hw_version" // TIMESTAMP(MICROS, UTC): the order of a version, survives rewrites
	ColDeleted = "_hw_deleted" // BOOLEAN: a tombstone
)

// Column is one source column as discovered in the catalog. Domains are
// already resolved to their base type.
type Column struct {
	Name     string `json:"name"`
	TypeOID  uint32 `json:"type_oid"`
	Typmod   int32  `json:"typmod"`
	TypeName string `json:"type"` // format_type(oid, typmod) of the declared type
	// TypType is pg_type.typtype of the resolved type: 'b' base, 'c' composite,
	// 'e' enum, 'r' range, 'm' multirange, 'p' pseudo.
	TypType byte `json:"-"`
	// ElemOID is the resolved element type of an array, 0 otherwise.
	ElemOID     uint32 `json:"elem_oid,omitempty"`
	ElemTypType byte   `json:"-"`
	NotNull     bool   `json:"not_null,omitempty"`
}

// Options choose among the documented alternatives of the type mapping.
type Options struct {
	TimeAsParquetTime bool // time/timetz as TIME(MICROS) instead of strings
	UUIDLogical       bool // uuid as FIXED_LEN_BYTE_ARRAY(16) UUID instead of strings
}

// Field is one column of a written file, as recorded in the commit log's
// schema history and used by the DDL of each engine.
type Field struct {
	Name       string `json:"name"`
	SourceType string `json:"source_type"`         // PostgreSQL type, e.g. "numeric(12,2)"
	Physical   string `json:"physical"`            // Parquet physical type, e.g. "INT64"
	Logical    string `json:"logical,omitempty"`   // Parquet logical type, e.g. "TIMESTAMP(MICROS,true)"
	Repeated   bool   `json:"repeated,omitempty"`  // a 3-level LIST of the element type
	Precision  int    `json:"precision,omitempty"` // decimals
	Scale      int    `json:"scale,omitempty"`     // decimals
	Nullable   bool   `json:"nullable"`
}

// Mapping turns rows of one source schema into Parquet rows. It is built
// once per run and is safe for use by one goroutine.
type Mapping interface {
	// SelectExprs returns, in column order, the SQL expression to select for
	// each source column given its quoted identifier: the identifier itself,
	// or a cast such as `"c"::text` for types written in their text form.
	// Results are always requested in binary format.
	SelectExprs(quotedIdents []string) []string
	// Schema is the Parquet schema of the files: the source columns in order,
	// then _hw_version and _hw_deleted.
	Schema() *parquet.Schema
	// Fields describes Schema for manifests and DDL.
	Fields() []Field
	// AppendRow converts one source row, given as binary wire values in column
	// order (nil is NULL), into a Parquet row appended to dst[:0].
	// version is the _hw_version in microseconds since the Unix epoch.
	AppendRow(dst parquet.Row, values [][]byte, version int64, deleted bool) (parquet.Row, error)
}

// NewMapping maps the columns to Parquet, or says which column has a type
// it cannot write.
func NewMapping(cols []Column, opts Options) (Mapping, error) {
	return newMapping(cols, opts)
}

// WriterOptions configure one Parquet file.
type WriterOptions struct {
	Compression string // "zstd" (default), "snappy", "gzip", "none"
	// Codec, when set, is used instead of Compression; share one across
	// the files of a run (see NewCodec).
	Codec        compress.Codec
	RowGroupRows int64 // flush a row group after this many rows
	// KeyValue is written into the footer; Spark's version key is always added.
	KeyValue map[string]string
	// Build is named in the footer's created_by.
	Build Build
}

// Build names the highwater that writes a file: the footer's created_by
// says "highwater version <Version> (build <Revision>)", so a reader can
// tell which release wrote it. The command passes its build info in; an
// empty Version is written as "dev".
type Build struct {
	Version, Revision string
}

// CreatedBy is the writer option that records b in a footer, in the
// form parquet-mr uses ("<app> version <v> (build <rev>)"), which readers
// parse; parquet.CreatedBy leaves out the space before "(build".
func (b Build) CreatedBy() parquet.WriterOption {
	v := b.Version
	if v == "" {
		v = "dev"
	}
	s := "highwater version " + v
	if b.Revision != "" {
		s += " (build " + b.Revision + ")"
	}
	return createdBy(s)
}

type createdBy string

func (c createdBy) ConfigureWriter(cfg *parquet.WriterConfig) { cfg.CreatedBy = string(c) }

// FileWriter writes one Parquet file.
type FileWriter interface {
	// WriteRows buffers rows into the current row group.
	WriteRows(rows []parquet.Row) (int, error)
	// Flush ends the current row group.
	Flush() error
	// BufferedBytes estimates the bytes held for the current row group.
	BufferedBytes() int64
	// SetKeyValue adds footer metadata; it may be called until Close.
	SetKeyValue(key, value string)
	// Close writes the footer. It does not close the underlying writer.
	Close() error
}

// NewFileWriter starts a Parquet file on w with the mapping's schema.
func NewFileWriter(w io.Writer, m Mapping, opts WriterOptions) (FileWriter, error) {
	return newFileWriter(w, m.Schema(), opts)
}

// NewSchemaWriter starts a Parquet file on w with a schema read from
// earlier files, as compaction rewrites them.
func NewSchemaWriter(w io.Writer, schema *parquet.Schema, opts WriterOptions) (FileWriter, error) {
	return newFileWriter(w, schema, opts)
}
