package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/iceberg"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/readers"
)

// cmdDDL prints what one engine needs to read a model's committed set with
// the union schema of its history. The output is a snapshot: the Athena table
// follows later commits by itself (it reads the symlink manifest, which every
// commit rewrites), the Spark and DuckDB ones name the files and must be
// generated again after a commit.
func cmdDDL(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ddl",
		Short: "Print what an engine needs to read a model",
		Long: `DDL prints what Athena (a symlink table), Spark (an explicit schema over the file list) or DuckDB (a
view) needs to read exactly the committed set, with the union schema of the model's history. With
--table-format iceberg it prints what Athena, BigQuery, DuckDB, Snowflake, Spark or Trino needs to read
the model's Iceberg table (docs/readers.md).`,
		Example: `  highwater ddl --dest s3://lake/raw --model orders --engine athena
  highwater ddl --dest file:///data/lake --model orders --engine duckdb | duckdb
  highwater ddl --dest s3://lake/raw --model orders --table-format iceberg --engine trino`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	engine := fs.String("engine", "", "engine: "+strings.Join(readers.Engines, ", "))
	table := fs.String("table-name", "", "`name` of the table or view to create (default: the model's name)")
	tableFormat := fs.String("table-format", "", "read the model's Iceberg table (`iceberg`) instead of its files: engines "+strings.Join(iceberg.Engines, ", "))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if *tableFormat != "" {
			return icebergDDL(ctx, env, &lake, *engine, *table, *tableFormat)
		}
		if lake.dest == "" || lake.model == "" || *engine == "" {
			return usageErr("--dest, --model and --engine are required")
		}
		if !slices.Contains(readers.Engines, *engine) {
			return usageErr("unknown engine %q: use %s", *engine, strings.Join(readers.Engines, ", "))
		}
		if *table == "" {
			*table = lake.model
		}
		d, err := lake.open(ctx, true)
		if err != nil {
			return err
		}
		defer d.Close()
		log := manifest.NewLog(d, lake.model)
		files, fields, err := readers.Load(ctx, log, d.ObjectURL)
		if err != nil {
			return fmt.Errorf("load %s at %s: %w", lake.model, d, err)
		}
		out, err := readers.Generate(*engine, readers.Input{Table: *table, ModelURL: d.ObjectURL(log.Key()), Files: files, Fields: fields})
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(env.stdout, out)
		return err
	}
	return cmd
}
