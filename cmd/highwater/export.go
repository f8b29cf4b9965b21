package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/config"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
)

func cmdExport(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Copy what changed in a table since the last run into the lake",
		Long: `Export reads the rows of a table (or a source query) whose modified-at column lies in the run's interval
[from, to) in keyset pages, writes them as Parquet files with a checkpoint each, and commits them to the
model's log. from is the committed watermark minus the lookback; to is the source's clock when the run
is planned. A run that dies is resumed by the next one from its last checkpoint.

Everything that needs no connection (flags, the config, the destination URL, the time zone, the codec)
is checked first: a usage or config error exits 2 before connecting to anything or creating anything.

With --config, each model, and each tenant of a model with tenants or a tenants_query, is a model
instance with its own state under the destination's {tenant}. --parallel N runs up to N instances at
once; --shard I/N takes only the instances of one shard, so that N processes split a fleet with no
coordinator (docs/tenants.md). Each instance commits on its own; a failure of one stops none of the
others, and a summary on stdout names every instance that failed, with its reason.

--dry-run discovers the schema, checks the identity, plans the interval as the run would (or finds
the unfinished run it would resume) and asks the planner how many rows the interval holds, then
prints the plan (--json: one object per model instance, docs/cli.md). It writes nothing anywhere:
no plan, no probe, no directory, not even at a destination that does not exist yet.`,
		Example: `  # one table, into a local lake
  highwater export --source postgres://exporter@db/app --table public.orders \
      --primary-key id --modified-at updated_at --dest file:///data/lake

  # every model of a config file, or some of them
  highwater export --config highwater.yaml
  highwater export --config highwater.yaml --model orders,order_lines

  # the tenants of a model, four at a time, in the second of three processes
  highwater export --config highwater.yaml --model orders --tenant acme --tenant globex
  highwater export --config highwater.yaml --parallel 4 --shard 1/3

  # what the next run would read, with nothing written
  highwater export --config highwater.yaml --model orders --dry-run`,
	}
	fs := cmd.Flags()
	var sel modelSelection
	sel.register(fs)
	// export's own words for the flags it shares with reconcile
	for name, usage := range map[string]string{
		"model":        "model `name` (default: the table name without its schema); with --config, the models to run (comma-separated or repeated)",
		"source-query": "custom `SQL` to export instead of a table",
		"dest":         "destination `URL`: file:///path, s3://bucket/prefix, gs://bucket/prefix, azblob://container/prefix",
	} {
		fs.Lookup(name).Usage = usage
	}
	var (
		lookback    = fs.Duration("lookback", watermark.DefaultLookback, "re-read this much below the watermark")
		softDelete  = fs.String("soft-delete", "", "`COL`umn that marks a row deleted (true, or not NULL): such rows are exported as tombstones")
		deleteLog   = fs.Bool("delete-log", false, "also read the delete log installed by 'highwater deletes install' and export its entries as tombstones")
		ff          fleetFlags
		fullRefresh = fs.Bool("full-refresh", false, "read every row and replace every earlier file")
		winStart    = fs.String("window-start", "", "backfill window start (inclusive), in the modified-at column's type")
		winEnd      = fs.String("window-end", "", "backfill window end (exclusive)")
		targetSize  = fs.String("target-file-size", "128MiB", "roll files at this `size`")
		rowGroup    = fs.String("row-group-size", "16MiB", "end row groups at this uncompressed `size`")
		pageRows    = fs.Int("page-rows", export.DefaultPageRows, "the most rows of a keyset page (a page also ends at about 64 MiB of rows)")
		compression = fs.String("compression", "zstd", "Parquet page `codec`: zstd, snappy, gzip or none")
		metricsFile = fs.String("metrics-file", "", "write the run's figures to this `file` in Prometheus text format (node_exporter's textfile collector)")
		dryRun      = fs.Bool("dry-run", false, "discover the schema, plan the interval and estimate its rows, print the plan, and write nothing anywhere")
		tableFormat = fs.String("table-format", "", "publish the model as a table `format` too: iceberg (recorded in the log; docs/readers.md)")
	)
	fs.StringArrayVar(&ff.tenants, "tenant", nil, "tenant `value`; with --config, the tenants to run (repeat for several)")
	ff.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		set := setFlags(fs)
		shard, err := ff.check()
		if err != nil {
			return err
		}
		runs, sourceURL, destURL, err := sel.instances(set, ff.tenants, "soft-delete", "delete-log")
		if err != nil {
			return err
		}
		if sel.config == "" {
			j := &runs[0]
			j.opts.PageRows = *pageRows
			j.opts.Source.SoftDelete = *softDelete
			j.opts.DeleteLog = *deleteLog
			// export has always named a flag-given instance by its model
			// alone, its tenant only in the source spec
			j.inst.Tenant = nil
			j.tableFormat = *tableFormat
		}
		if err := checkTableFormat(*tableFormat); err != nil {
			return err
		}
		if sourceURL, destURL, err = sel.urls(env, runs, sourceURL, destURL); err != nil {
			return err
		}
		for i := range runs {
			o := &runs[i].opts
			if set["lookback"] {
				if *lookback < 0 {
					return usageErr("--lookback %s is negative", *lookback)
				}
				o.Lookback = *lookback
			}
			if set["full-refresh"] {
				o.FullRefresh = *fullRefresh
			}
			if set["table-format"] {
				runs[i].tableFormat = *tableFormat
			}
			o.WindowStart, o.WindowEnd = *winStart, *winEnd
			if set["page-rows"] {
				if *pageRows <= 0 {
					return usageErr("--page-rows %d: a page needs at least one row", *pageRows)
				}
				o.PageRows = *pageRows
			}
			if set["time-zone"] {
				o.TimeZone = sel.timeZone
			}
			for _, s := range []struct {
				flag string
				val  string
				dst  *int64
			}{{"target-file-size", *targetSize, &o.TargetFileBytes}, {"row-group-size", *rowGroup, &o.RowGroupBytes}} {
				if !set[s.flag] {
					continue
				}
				n, err := config.ParseSize(s.val)
				if err != nil {
					return usageErr("--%s: %v", s.flag, err)
				}
				*s.dst = n
			}
			if set["compression"] || o.Compression == "" {
				o.Compression = *compression
			}
			o.Logger = env.logger
			o.Failpoint = env.failpoint()
			o.Build = env.build.formats()
			if err := checkOptions(o, destURL); err != nil {
				return err
			}
		}

		if *dryRun && *metricsFile != "" {
			return usageErr("--dry-run writes nothing, so it takes no --metrics-file")
		}
		if err := checkMetricsFile(*metricsFile); err != nil {
			return err
		}
		setMemoryLimit(env, runs, ff.parallel)
		defer leaveSourceACore(env, sourceURL, ff.parallel)()
		return runExports(ctx, env, &ff, shard, ff.fleetMode(set, runs), sourceURL, destURL, *metricsFile, *dryRun, runs)
	}
	return cmd
}

// checkMetricsFile refuses, before anything runs, a metrics file whose
// directory is not there.
func checkMetricsFile(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return usageErr("--metrics-file %s: its directory does not exist", path)
	}
	return nil
}

// checkOptions checks one run's options before anything is connected or
// created, so that every usage error exits 2 with nothing touched.
func checkOptions(o *export.Options, destURL string) error {
	if err := o.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if _, err := formats.NewCodec(o.Compression); err != nil {
		return usageErr("--compression: %v", err)
	}
	if o.TimeZone != "" {
		if _, err := time.LoadLocation(o.TimeZone); err != nil {
			return usageErr("--time-zone %q is not an IANA time zone (such as Europe/Berlin or UTC)", o.TimeZone)
		}
	}
	// pgsource checks these too, after connecting; here they cost nothing.
	switch {
	case o.Source.TenantColumn != "" && o.Source.Tenant == nil:
		return usageErr("model %s: a tenant column is set but no tenant value", o.Model)
	case o.Source.TenantColumn == "" && o.Source.Tenant != nil:
		return usageErr("model %s: a tenant value is set but no tenant column", o.Model)
	}
	if destURL == "" { // config validate of a config whose dest comes by flag
		return nil
	}
	return checkDest(destURL, o.Source.Tenant)
}

func optionsFromConfig(cfg *config.File, m config.Model) (export.Options, error) {
	t := cfg.Defaults.Merge(m.Tuning)
	o := export.Options{Model: m.Name, Lookback: watermark.DefaultLookback, PageRows: t.PageRows, TimeZone: t.TimeZone, Compression: t.Compression}
	if d, _ := t.LookbackDuration(); d >= 0 {
		o.Lookback = d
	}
	o.TargetFileBytes, _ = config.ParseSize(t.TargetFileSize)
	o.RowGroupBytes, _ = config.ParseSize(t.RowGroupSize)
	o.Source = pgsource.Spec{Table: m.Table, Query: m.SourceQuery, PrimaryKey: m.PrimaryKey, ModifiedAt: m.ModifiedAt,
		TenantColumn: m.TenantColumn, Tenant: m.Tenant, SoftDelete: m.SoftDelete}
	o.DeleteLog = m.DeleteLog
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
func setMemoryLimit(env *environment, runs []job, parallel int) {
	if env.getenv("GOMEMLIMIT") != "" {
		return
	}
	rowGroup := int64(export.DefaultRowGroupBytes)
	for _, j := range runs {
		rowGroup = max(rowGroup, j.opts.RowGroupBytes)
	}
	// Each instance running at once holds its own row group.
	debug.SetMemoryLimit(int64(max(1, min(parallel, len(runs))))*2*rowGroup + 64<<20)
}
