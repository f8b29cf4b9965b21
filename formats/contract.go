package formats

// This file is the contract between the PostgreSQL source (internal/pgsource),
// the exporter (export) and the Parquet side (this package). The bodies are
// filled by the formats work (issue 4).

import (
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// ContentType is the media type of the files, as stores record it.
const ContentType = "application/vnd.apache.parquet"

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

// WriterOptions configure one Parquet file.
type WriterOptions struct {
	Compression string // "zstd" (default), "snappy", "gzip", "none"
	// Codec, when set, is used instead of Compression; share one across
	// the files of a run (see NewCodec).
	Codec compress.Codec
	// RowGroupRows and RowGroupBytes bound a row group; zero is no bound.
	// RowGroupBytes counts the raw size of rows as the caller measures them
	// (see FileWriter.Write).
	RowGroupRows  int64
	RowGroupBytes int64
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
