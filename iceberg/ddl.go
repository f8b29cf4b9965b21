package iceberg

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/highwater-dev/highwater/manifest"
)

// Engines are the engines DDL knows.
var Engines = []string{"athena", "bigquery", "duckdb", "snowflake", "spark", "trino"}

// Head says where the view stands against st, the log's state, without
// changing it: Result's To is st.Seq when the view shows st's table, and
// otherwise the seq of its current snapshot (0: none); Version and
// MetadataURL are its newest metadata version (0: no view).
func (v *View) Head(ctx context.Context, st *manifest.State) (*Result, error) {
	cur, err := v.current(ctx)
	if err != nil {
		return nil, err
	}
	lg, err := v.lag(ctx, cur, st, markOf(st))
	if err != nil {
		return nil, err
	}
	return &Result{From: lg.covered, To: lg.covered, Version: cur.version, MetadataURL: v.MetadataURL(cur.version)}, nil
}

// DDL prints what engine needs to read the view as table name: the
// statements of docs/readers.md, filled in with the table's location and its
// newest metadata file. Engines that read a metadata file (rather than the
// version hint or a catalog) see later commits only once pointed at a newer
// file: the statements say how.
func DDL(engine, name, location, metadataURL string) (string, error) {
	file := metadataURL[strings.LastIndex(metadataURL, "/")+1:]
	var b strings.Builder
	switch engine {
	case "duckdb":
		// DuckDB's iceberg extension reads the version hint when given the
		// table's directory; a metadata file pins one version.
		fmt.Fprintf(&b, "INSTALL iceberg;\nLOAD iceberg;\nCREATE OR REPLACE VIEW %s AS SELECT * FROM iceberg_scan(%s);\n",
			quoteIdent(name), quoteString(metadataURL))
	case "spark":
		// Path-based tables (HadoopTables) read version-hint.text, so they
		// follow every commit by themselves.
		fmt.Fprintf(&b, "-- Spark 3 with the iceberg-spark-runtime jar on the class path.\n"+
			"-- PySpark: spark.read.format(\"iceberg\").load(%s)\n"+
			"CREATE OR REPLACE TEMPORARY VIEW %s AS SELECT * FROM iceberg.`%s`;\n",
			quoteString(location), quoteIdent(name), location)
	case "trino":
		fmt.Fprintf(&b, "-- Trino's Iceberg connector (iceberg.register-table-procedure.enabled=true).\n"+
			"CALL iceberg.system.register_table(schema_name => 'default', table_name => %s, table_location => %s, metadata_file_name => %s);\n"+
			"-- After later commits: CALL iceberg.system.unregister_table('default', %s), then register_table again,\n"+
			"-- or use a catalog that highwater iceberg register moves.\n",
			quoteString(name), quoteString(location), quoteString(file), quoteString(name))
	case "athena":
		// Athena reads Iceberg tables through Glue, whose table names the
		// metadata file.
		fmt.Fprintf(&b, "# Athena reads Iceberg through the AWS Glue Data Catalog: create the Glue table, then query it.\n"+
			"aws glue create-table --database-name default --table-input '%s'\n"+
			"# After later commits: aws glue update-table with the newer metadata_location (and previous_metadata_location).\n",
			glueInput(name, location, metadataURL))
	case "snowflake":
		fmt.Fprintf(&b, "-- An external volume on the lake's bucket and a catalog integration with CATALOG_SOURCE = OBJECT_STORE,\n"+
			"-- TABLE_FORMAT = ICEBERG, must exist (their names below are yours to change).\n"+
			"CREATE ICEBERG TABLE %s EXTERNAL_VOLUME = 'highwater_lake' CATALOG = 'highwater_object_store'\n"+
			"  METADATA_FILE_PATH = %s;\n"+
			"-- After later commits: ALTER ICEBERG TABLE %s REFRESH '<path of the newer metadata file>';\n",
			quoteIdent(name), quoteString(relativeToBucket(metadataURL)), quoteIdent(name))
	case "bigquery":
		fmt.Fprintf(&b, "-- A BigLake connection to the bucket must exist (its name below is yours to change).\n"+
			"CREATE OR REPLACE EXTERNAL TABLE `default`.%s WITH CONNECTION `us.highwater_lake`\n"+
			"  OPTIONS (format = 'ICEBERG', uris = [%s]);\n"+
			"-- After later commits: run this statement again with the newer metadata file.\n",
			"`"+strings.ReplaceAll(name, "`", "")+"`", quoteString(metadataURL))
	default:
		return "", fmt.Errorf("unknown engine %q: use %s", engine, strings.Join(Engines, ", "))
	}
	return b.String(), nil
}

func quoteIdent(s string) string  { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// relativeToBucket is the key of an object URL within its bucket, as
// Snowflake's METADATA_FILE_PATH is relative to the external volume.
func relativeToBucket(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return strings.TrimPrefix(p.Path, "/")
}

func glueInput(name, location, metadataURL string) string {
	s := fmt.Sprintf(`{"Name": %q, "TableType": "EXTERNAL_TABLE", "Parameters": {"table_type": "ICEBERG", "metadata_location": %q}, "StorageDescriptor": {"Location": %q}}`,
		name, metadataURL, location)
	return strings.ReplaceAll(s, "'", `'\''`)
}
