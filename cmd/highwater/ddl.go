package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/readers"
)

// cmdDDL prints what one engine needs to read a model's committed set with
// the union schema of its history. The output is a snapshot: the Athena table
// follows later commits by itself (it reads the symlink manifest, which every
// commit rewrites), the Spark and DuckDB ones name the files and must be
// generated again after a commit.
func cmdDDL(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("ddl", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var lake lakeFlags
	lake.register(fs, "model `name`")
	engine := fs.String("engine", "", "engine: "+strings.Join(readers.Engines, ", "))
	table := fs.String("table-name", "", "`name` of the table or view to create (default: the model's name)")
	if err := parseFlags(fs, args); err != nil {
		return err
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
