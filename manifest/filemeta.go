package manifest

// Keys of the Parquet key-value metadata in every data file. They repeat,
// in the file itself, what the log says of it, so that a stray file
// explains itself (docs: design, Files). They live here rather than in
// formats because they name the lake's state (runs, attempts, intervals,
// FormatVersion), which formats, the Parquet encoding, knows nothing of;
// Spark's calendar key is a Parquet matter and stays there.
const (
	MetaModel         = "highwater.model"
	MetaRunID         = "highwater.run_id"
	MetaAttemptID     = "highwater.attempt_id" // export files
	MetaKind          = "highwater.kind"
	MetaIntervalFrom  = "highwater.interval.from" // export files
	MetaIntervalTo    = "highwater.interval.to"   // export files
	MetaSchemaID      = "highwater.schema_id"     // export files
	MetaFormatVersion = "highwater.format_version"
	MetaLastKey       = "highwater.last_key" // export files: the JSON Cursor of the last row
	MetaBucket        = "highwater.bucket"   // dedupe files: the layout bucket of every row
)
