package readers

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/formats"
)

var fields = []formats.Field{
	{Name: "id", Physical: "INT64"},
	{Name: `we"ird`, Physical: "BYTE_ARRAY", Logical: "STRING"},
	{Name: "back`tick", Physical: "INT32", Logical: "DECIMAL(9,2)", Precision: 9, Scale: 2},
	{Name: "tags", Physical: "BYTE_ARRAY", Logical: "STRING", Repeated: true},
	{Name: "at", Physical: "INT64", Logical: "TIMESTAMP(MICROS,false)"},
}

func TestQuotingAndTypes(t *testing.T) {
	in := Input{Table: "t", ModelURL: "s3://b/p/m", Files: []string{"s3://b/p/m/data/r/a/part-000001.parquet"}, Fields: fields}
	for engine, wants := range map[string][]string{
		Athena: {"`we\"ird` string", "`back``tick` decimal(9,2)", "`tags` array<string>", "`at` timestamp\n",
			"LOCATION 's3://b/p/m/_symlink_format_manifest/'"},
		Spark: {`"` + "`we\\\"ird` string" + `"`, "`back``tick` decimal(9,2)", "`at` timestamp_ntz",
			`"s3a://b/p/m/data/r/a/part-000001.parquet"`, "df.createOrReplaceTempView(\"`t`\")"},
		DuckDB: {`CREATE OR REPLACE VIEW "t" AS`, `"we""ird"`, "\"back`tick\"",
			`FROM read_parquet([` + "\n  's3://b/p/m/data/r/a/part-000001.parquet'\n], union_by_name = true);"},
	} {
		out, err := Generate(engine, in)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s DDL lacks %q:\n%s", engine, w, out)
			}
		}
	}
}

func TestEmptyCommittedSet(t *testing.T) {
	// A full refresh of an empty table commits no file: the view must still
	// have the model's columns, with their types.
	in := Input{Table: "t", ModelURL: "file:///lake/m", Fields: fields}
	out, err := Generate(DuckDB, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`CAST(NULL AS DECIMAL(9,2)) AS "back` + "`tick\"", `CAST(NULL AS VARCHAR[]) AS "tags"`, "WHERE false;"} {
		if !strings.Contains(out, w) {
			t.Errorf("DuckDB DDL lacks %q:\n%s", w, out)
		}
	}
	out, err = Generate(Spark, in)
	if err != nil || !strings.Contains(out, "spark.createDataFrame([], schema)") {
		t.Errorf("Spark DDL without files: %v\n%s", err, out)
	}
}

func TestUnsupportedTypesAndEngines(t *testing.T) {
	time := []formats.Field{{Name: "t", Physical: "INT64", Logical: "TIME(MICROS,false)"}}
	if _, err := Generate(Spark, Input{Table: "x", Fields: time}); err == nil || !strings.Contains(err.Error(), `column "t"`) {
		t.Errorf("Spark with a TIME column: %v", err)
	}
	if _, err := Generate(DuckDB, Input{Table: "x", Files: []string{"file:///a.parquet"}, Fields: time}); err != nil {
		t.Errorf("DuckDB reads TIME: %v", err)
	}
	if _, err := Generate("hive", Input{Table: "x", Fields: fields}); err == nil || !strings.Contains(err.Error(), "athena, spark, duckdb") {
		t.Errorf("unknown engine: %v", err)
	}
}

func TestDuckURL(t *testing.T) {
	for in, want := range map[string]string{
		"file:///lake/a%20b/x.parquet": "/lake/a%20b/x.parquet",
		"azblob://c/p/x.parquet":       "az://c/p/x.parquet",
		"gs://b/x.parquet":             "gs://b/x.parquet",
	} {
		if got := duckURL(in); got != want {
			t.Errorf("duckURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSparkViewNameQuoted checks that the temporary view's name reaches
// Spark as one quoted identifier: createOrReplaceTempView parses its
// argument, so "my-model" is a syntax error and "a.b" names a database.
func TestSparkViewNameQuoted(t *testing.T) {
	for name, want := range map[string]string{
		"orders":    "df.createOrReplaceTempView(\"`orders`\")",
		"my-model":  "df.createOrReplaceTempView(\"`my-model`\")",
		"a.b":       "df.createOrReplaceTempView(\"`a.b`\")",
		"back`tick": "df.createOrReplaceTempView(\"`back``tick`\")",
	} {
		out, err := Generate(Spark, Input{Table: name, ModelURL: "file:///lake/m", Fields: fields})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("view %q: the DDL lacks %s:\n%s", name, want, out)
		}
	}
}
