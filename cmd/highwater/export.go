package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/config"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgsource"
)

func cmdExport(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var (
		configPath  = fs.String("config", "", "YAML config `file` with several models")
		modelName   = fs.String("model", "", "model `name` (default: the table name without its schema); with --config, the model to run")
		source      = fs.String("source", "", "PostgreSQL `URL` (default $HIGHWATER_SOURCE)")
		table       = fs.String("table", "", "source `SCHEMA.TABLE`")
		query       = fs.String("source-query", "", "custom `SQL` to export instead of a table")
		pk          = fs.String("primary-key", "", "primary key `COL[,COL]`")
		modifiedAt  = fs.String("modified-at", "", "modified-at `COL`umn (timestamptz, timestamp or date)")
		dest        = fs.String("dest", "", "destination `URL`: file:///path, s3://bucket/prefix, gs://bucket/prefix, azblob://container/prefix")
		lookback    = fs.Duration("lookback", -1, "re-read this much below the watermark (default 30s)")
		tenantCol   = fs.String("tenant-column", "", "tenant `COL`umn")
		tenant      = fs.String("tenant", "", "tenant `value`")
		fullRefresh = fs.Bool("full-refresh", false, "read every row and replace every earlier file")
		winStart    = fs.String("window-start", "", "backfill window start (inclusive), in the modified-at column's type")
		winEnd      = fs.String("window-end", "", "backfill window end (exclusive)")
		targetSize  = fs.String("target-file-size", "", "roll files at this `size` (default 128MiB)")
		rowGroup    = fs.String("row-group-size", "", "end row groups at this uncompressed `size` (default 16MiB)")
		pageRows    = fs.Int("page-rows", 0, "rows per keyset page (default 50000)")
		timeZone    = fs.String("time-zone", "", "time `zone` of a naive timestamp column (default: the database's)")
		compression = fs.String("compression", "zstd", "Parquet page `codec`: zstd, snappy, gzip or none")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var runs []export.Options
	sourceURL, destURL := *source, *dest
	if *configPath != "" {
		for _, name := range []string{"table", "source-query", "primary-key", "modified-at", "tenant-column", "tenant"} {
			if set[name] {
				return usageErr("--%s goes in the config file, not with --config", name)
			}
		}
		cfg, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		if sourceURL == "" {
			sourceURL = cfg.Source
		}
		if destURL == "" {
			destURL = cfg.Dest
		}
		for _, m := range cfg.Models {
			if *modelName != "" && m.Name != *modelName {
				continue
			}
			o, err := optionsFromConfig(cfg, m)
			if err != nil {
				return err
			}
			runs = append(runs, o)
		}
		if len(runs) == 0 {
			return fmt.Errorf("config has no model named %q", *modelName)
		}
	} else {
		if *table == "" && *query == "" {
			return usageErr("--table (or --source-query) is required")
		}
		if *pk == "" || *modifiedAt == "" {
			return usageErr("--primary-key and --modified-at are required")
		}
		name := *modelName
		if name == "" {
			if *table == "" {
				return usageErr("--model is required with --source-query")
			}
			name = defaultModelName(*table)
		}
		o := export.Options{Model: name, Lookback: export.DefaultLookback, TimeZone: *timeZone, PageRows: *pageRows}
		o.Source = pgsource.Spec{Table: *table, Query: *query, PrimaryKey: splitList(*pk), ModifiedAt: *modifiedAt, TenantColumn: *tenantCol}
		if set["tenant"] {
			o.Source.Tenant = tenant
		}
		runs = append(runs, o)
	}
	if sourceURL == "" {
		sourceURL = env.getenv("HIGHWATER_SOURCE")
	}
	if sourceURL == "" {
		return usageErr("--source is required (or $HIGHWATER_SOURCE, or source: in the config)")
	}
	if destURL == "" {
		return usageErr("--dest is required")
	}
	for i := range runs {
		o := &runs[i]
		if set["lookback"] {
			if *lookback < 0 {
				return usageErr("--lookback %s is negative", *lookback)
			}
			o.Lookback = *lookback
		}
		if set["full-refresh"] {
			o.FullRefresh = *fullRefresh
		}
		o.WindowStart, o.WindowEnd = *winStart, *winEnd
		if set["page-rows"] {
			o.PageRows = *pageRows
		}
		if set["time-zone"] {
			o.TimeZone = *timeZone
		}
		for _, s := range []struct {
			flag string
			val  string
			dst  *int64
		}{{"target-file-size", *targetSize, &o.TargetFileBytes}, {"row-group-size", *rowGroup, &o.RowGroupBytes}} {
			if s.val == "" {
				continue
			}
			n, err := config.ParseSize(s.val)
			if err != nil {
				return usageErr("--%s: %v", s.flag, err)
			}
			*s.dst = n
		}
		o.Compression = *compression
		o.Logger = env.logger
		o.Failpoint = env.failpoint()
		if err := o.Validate(); err != nil {
			return usageErr("%v", err)
		}
	}

	setMemoryLimit(env, runs)
	src, err := pgsource.Connect(ctx, sourceURL)
	if err != nil {
		return err
	}
	defer src.Close(context.WithoutCancel(ctx))
	var failed []string
	for _, o := range runs {
		d, err := destination.Open(ctx, destURL, tenantOf(o))
		if err != nil {
			return err
		}
		start := time.Now()
		res, err := export.Run(ctx, src, d, o)
		d.Close()
		if err != nil {
			if len(runs) == 1 {
				return err
			}
			env.logger.Error("export failed", "model", o.Model, "error", err.Error())
			failed = append(failed, o.Model+": "+err.Error())
			continue
		}
		c := res.Commit
		fmt.Fprintf(env.stdout, "%s: committed seq %d (%s), %d rows in %d files, watermark %s, %.1fs\n",
			o.Model, c.Seq, c.Kind, c.Metrics.RowsTransferred, len(c.Added), deref(c.Watermark), time.Since(start).Seconds())
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

func tenantOf(o export.Options) string {
	if o.Source.Tenant == nil {
		return ""
	}
	return *o.Source.Tenant
}

func optionsFromConfig(cfg *config.File, m config.Model) (export.Options, error) {
	t := cfg.Defaults.Merge(m.Tuning)
	o := export.Options{Model: m.Name, Lookback: export.DefaultLookback, PageRows: t.PageRows, TimeZone: t.TimeZone}
	if d, _ := t.LookbackDuration(); d >= 0 {
		o.Lookback = d
	}
	o.TargetFileBytes, _ = config.ParseSize(t.TargetFileSize)
	o.RowGroupBytes, _ = config.ParseSize(t.RowGroupSize)
	o.Source = pgsource.Spec{Table: m.Table, Query: m.SourceQuery, PrimaryKey: m.PrimaryKey, ModifiedAt: m.ModifiedAt,
		TenantColumn: m.TenantColumn, Tenant: m.Tenant}
	return o, nil
}

// defaultModelName is the table name without its schema, unquoted the way
// PostgreSQL reads it: "Sch.ema"."My ""Tab""" names the model My "Tab".
func defaultModelName(table string) string {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(table); i++ {
		c := table[i]
		switch {
		case c == '"' && quoted && i+1 < len(table) && table[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, cur.String())[len(parts)]
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// setMemoryLimit gives the garbage collector a soft limit that fits the
// runs' row groups, unless GOMEMLIMIT says otherwise: without one the heap
// grows to twice its live size, and an export's live size is mostly one
// row group.
func setMemoryLimit(env *environment, runs []export.Options) {
	if env.getenv("GOMEMLIMIT") != "" {
		return
	}
	rowGroup := int64(export.DefaultRowGroupBytes)
	for _, o := range runs {
		rowGroup = max(rowGroup, o.RowGroupBytes)
	}
	debug.SetMemoryLimit(2*rowGroup + 64<<20)
}
