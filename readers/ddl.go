// Package readers generates what query engines need to read a model's
// committed set with the model's schema: an Athena symlink table, a PySpark
// snippet with an explicit schema over the file list, and a DuckDB view.
//
// Every engine is given the union of the schemas of the files it reads, not
// the schema of the newest run: files written before a column was added lack
// it, files written after it was dropped lack it too, and each engine reads
// such a column as NULL only when the table's schema names it.
package readers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/manifest"
)

// Engines that Generate knows.
const (
	Athena = "athena"
	Spark  = "spark"
	DuckDB = "duckdb"
)

// Engines lists the engines in the order the usage text names them.
var Engines = []string{Athena, Spark, DuckDB}

// Input is what every engine's DDL is made of.
type Input struct {
	// Table is the name of the table or view to create.
	Table string
	// ModelURL is the URL of the model's root, e.g. s3://bucket/prefix/orders.
	ModelURL string
	// Files are the URLs of the committed files, in commit order.
	Files []string
	// Fields is the union schema (see UnionSchema).
	Fields []formats.Field
}

// Load reads the committed set and the union schema of a model's log.
// objectURL turns a key below the bucket's root into the URL engines read.
func Load(ctx context.Context, log *manifest.Log, objectURL func(key string) string) (files []string, fields []formats.Field, err error) {
	st, err := log.ReadState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the state of %s: %w", log.Model(), err)
	}
	if st.Seq == 0 {
		return nil, nil, fmt.Errorf("model %q has no commits", log.Model())
	}
	for _, f := range st.Files {
		files = append(files, objectURL(log.Key(f.Key)))
	}
	fields, err = UnionSchema(ctx, log, st)
	if err != nil {
		return nil, nil, err
	}
	return files, fields, nil
}

// UnionSchema folds formats.Evolve over the schemas of the log's commits,
// oldest first, keeping only the schemas that some file of the committed set
// st still has. A schema whose files all left the set (a full refresh
// replaced them, for one) is skipped: its columns are in no file any engine
// reads, and its types may legitimately differ from today's, which is what a
// full refresh after int to bigint is for. When no file is left (a full
// refresh of an empty table) the newest schema stands alone, so that the
// DDL still names every column.
func UnionSchema(ctx context.Context, log *manifest.Log, st *manifest.State) ([]formats.Field, error) {
	live := make(map[string]bool, len(st.Files))
	for _, f := range st.Files {
		live[f.SchemaID] = true
	}
	var union []formats.Field
	err := log.History(ctx, func(c *manifest.Commit) error {
		if c.Seq > st.Seq || c.Schema == nil || !live[c.Schema.ID] {
			return nil
		}
		u, err := formats.Evolve(union, c.Schema.Fields)
		if err != nil {
			return fmt.Errorf("fold the schema of commit %d: %w", c.Seq, err)
		}
		union = u
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the schema history of %s: %w", log.Model(), err)
	}
	if union == nil && st.Schema != nil {
		union = slices.Clone(st.Schema.Fields)
	}
	if union == nil {
		return nil, fmt.Errorf("model %q records no schema", log.Model())
	}
	return union, nil
}

// Generate returns the DDL of one engine.
func Generate(engine string, in Input) (string, error) {
	if len(in.Fields) == 0 {
		return "", fmt.Errorf("generate %s DDL: no columns", engine)
	}
	switch engine {
	case Athena:
		return athenaDDL(in)
	case Spark:
		return sparkDDL(in)
	case DuckDB:
		return duckDDL(in)
	}
	return "", fmt.Errorf("generate DDL: unknown engine %q: use %s", engine, strings.Join(Engines, ", "))
}

// hiveQuote quotes an identifier for Athena's DDL and Spark SQL: backticks,
// a backtick doubled.
func hiveQuote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// duckQuote quotes an identifier for DuckDB: double quotes, doubled inside.
func duckQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// sqlString is a standard SQL string literal (DuckDB).
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// hiveString is a Hive DDL string literal, which Athena parses with
// backslash escapes.
func hiveString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// pyString is a Python string literal. strconv.Quote's escapes (\", \\,
// \n, \t, \uXXXX, \UXXXXXXXX) mean the same in Python.
func pyString(s string) string {
	q := strconv.QuoteToASCII(s)
	if strings.Contains(q, `\x`) {
		// Invalid UTF-8 cannot be a key in any store highwater writes to.
		q = strconv.QuoteToASCII(strings.ToValidUTF8(s, "\uFFFD"))
	}
	return q
}

// hiveType is the Athena (Hive DDL) and Spark type of a field; the two
// agree on every type highwater writes except naive timestamps.
func hiveType(f formats.Field, engine string) (string, error) {
	t, err := hiveScalar(f, engine)
	if err != nil {
		return "", err
	}
	if f.Repeated {
		return "array<" + t + ">", nil
	}
	return t, nil
}

func hiveScalar(f formats.Field, engine string) (string, error) {
	switch {
	case strings.HasPrefix(f.Logical, "DECIMAL"):
		return fmt.Sprintf("decimal(%d,%d)", f.Precision, f.Scale), nil
	case f.Logical == "STRING":
		return "string", nil
	case f.Logical == "DATE":
		return "date", nil
	case f.Logical == "TIMESTAMP(MICROS,true)":
		return "timestamp", nil
	case f.Logical == "TIMESTAMP(MICROS,false)":
		// Spark 3.4+ reads a naive timestamp as timestamp_ntz, and refuses
		// to read it as a zoned one; Athena has only timestamp, naive.
		if engine == Spark {
			return "timestamp_ntz", nil
		}
		return "timestamp", nil
	case f.Logical != "":
		return "", fmt.Errorf("column %q: %s has no %s type (it needs the default type options)", f.Name, f.Logical, engine)
	}
	switch f.Physical {
	case "INT32":
		return "int", nil
	case "INT64":
		return "bigint", nil
	case "FLOAT":
		return "float", nil
	case "DOUBLE":
		return "double", nil
	case "BOOLEAN":
		return "boolean", nil
	case "BYTE_ARRAY":
		return "binary", nil
	}
	return "", fmt.Errorf("column %q: Parquet type %s has no %s type", f.Name, f.Physical, engine)
}

// duckType is the DuckDB type of a field.
func duckType(f formats.Field) (string, error) {
	var t string
	switch {
	case strings.HasPrefix(f.Logical, "DECIMAL"):
		t = fmt.Sprintf("DECIMAL(%d,%d)", f.Precision, f.Scale)
	case f.Logical == "STRING":
		t = "VARCHAR"
	case f.Logical == "DATE":
		t = "DATE"
	case f.Logical == "TIMESTAMP(MICROS,true)":
		t = "TIMESTAMP WITH TIME ZONE"
	case f.Logical == "TIMESTAMP(MICROS,false)":
		t = "TIMESTAMP"
	case f.Logical == "TIME(MICROS,false)":
		t = "TIME"
	case f.Logical == "TIME(MICROS,true)":
		t = "TIME WITH TIME ZONE"
	case f.Logical == "UUID":
		t = "UUID"
	case f.Logical != "":
		return "", fmt.Errorf("column %q: %s has no DuckDB type", f.Name, f.Logical)
	default:
		t = map[string]string{"INT32": "INTEGER", "INT64": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE",
			"BOOLEAN": "BOOLEAN", "BYTE_ARRAY": "BLOB"}[f.Physical]
		if t == "" {
			return "", fmt.Errorf("column %q: Parquet type %s has no DuckDB type", f.Name, f.Physical)
		}
	}
	if f.Repeated {
		t += "[]"
	}
	return t, nil
}

func athenaDDL(in Input) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE EXTERNAL TABLE %s (\n", hiveQuote(in.Table))
	for i, f := range in.Fields {
		t, err := hiveType(f, Athena)
		if err != nil {
			return "", fmt.Errorf("generate Athena DDL: %w", err)
		}
		sep := ","
		if i == len(in.Fields)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  %s %s%s\n", hiveQuote(f.Name), t, sep)
	}
	b.WriteString(")\n")
	b.WriteString("ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe'\n")
	b.WriteString("STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'\n")
	b.WriteString("OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'\n")
	fmt.Fprintf(&b, "LOCATION %s;\n", hiveString(strings.TrimSuffix(in.ModelURL, "/")+"/_symlink_format_manifest/"))
	return b.String(), nil
}

// sparkDDL emits PySpark: Spark's native Parquet reader ignores symlink
// manifests, and neither CREATE VIEW ... USING parquet nor a DDL string can
// take a list of paths, but DataFrameReader.parquet takes any number. The
// explicit schema makes Spark read columns by name and give NULL where a
// file lacks one, instead of inferring the schema from one file.
func sparkDDL(in Input) (string, error) {
	cols := make([]string, len(in.Fields))
	for i, f := range in.Fields {
		t, err := hiveType(f, Spark)
		if err != nil {
			return "", fmt.Errorf("generate Spark DDL: %w", err)
		}
		cols[i] = hiveQuote(f.Name) + " " + t
	}
	var b strings.Builder
	b.WriteString("# PySpark: the committed files of the model, with the union schema of their history.\n")
	b.WriteString("from pyspark.sql import SparkSession\n\n")
	b.WriteString("spark = SparkSession.builder.getOrCreate()\n")
	b.WriteString("schema = \", \".join([\n")
	for _, c := range cols {
		fmt.Fprintf(&b, "    %s,\n", pyString(c))
	}
	b.WriteString("])\n")
	if len(in.Files) == 0 {
		b.WriteString("df = spark.createDataFrame([], schema)\n")
	} else {
		b.WriteString("paths = [\n")
		for _, f := range in.Files {
			fmt.Fprintf(&b, "    %s,\n", pyString(sparkURL(f)))
		}
		b.WriteString("]\n")
		b.WriteString("df = spark.read.schema(schema).parquet(*paths)\n")
	}
	// createOrReplaceTempView parses its argument as a (multi-part)
	// identifier: quoted, any model name is one name.
	fmt.Fprintf(&b, "df.createOrReplaceTempView(%s)\n", pyString(hiveQuote(in.Table)))
	return b.String(), nil
}

// sparkURL maps highwater's destination schemes to the Hadoop file
// systems Spark reads: s3a for S3 (s3:// only works on EMR and
// Databricks), gs for GCS. An Azure URL needs the storage account, which
// highwater's azblob URL does not hold, so it is left for the reader.
func sparkURL(u string) string {
	if rest, ok := strings.CutPrefix(u, "s3://"); ok {
		return "s3a://" + rest
	}
	return u
}

// duckURL maps object URLs to what DuckDB's read_parquet takes: a plain
// path for local files, az:// for Azure Blob Storage.
func duckURL(u string) string {
	// destination.ObjectURL joins the path unescaped, so nothing is
	// unescaped here either: a key may hold a literal %.
	if rest, ok := strings.CutPrefix(u, "file://"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(u, "azblob://"); ok {
		return "az://" + rest
	}
	return u
}

// duckDDL selects the union's columns by name, in the union's order, so
// that the view has the same columns as the other engines' tables whatever
// order DuckDB's union_by_name meets them in; union_by_name gives NULL for
// a column a file lacks.
func duckDDL(in Input) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE OR REPLACE VIEW %s AS\nSELECT\n", duckQuote(in.Table))
	for i, f := range in.Fields {
		sep := ","
		if i == len(in.Fields)-1 {
			sep = ""
		}
		if len(in.Files) == 0 {
			// No file to read: an empty relation with the right types.
			t, err := duckType(f)
			if err != nil {
				return "", fmt.Errorf("generate DuckDB DDL: %w", err)
			}
			fmt.Fprintf(&b, "  CAST(NULL AS %s) AS %s%s\n", t, duckQuote(f.Name), sep)
			continue
		}
		if _, err := duckType(f); err != nil {
			return "", fmt.Errorf("generate DuckDB DDL: %w", err)
		}
		fmt.Fprintf(&b, "  %s%s\n", duckQuote(f.Name), sep)
	}
	if len(in.Files) == 0 {
		b.WriteString("WHERE false;\n")
		return b.String(), nil
	}
	b.WriteString("FROM read_parquet([\n")
	for i, f := range in.Files {
		sep := ","
		if i == len(in.Files)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  %s%s\n", sqlString(duckURL(f)), sep)
	}
	b.WriteString("], union_by_name = true);\n")
	return b.String(), nil
}
