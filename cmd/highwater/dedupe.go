package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/config"
)

func cmdDedupe(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dedupe",
		Short: "Rewrite the committed set to one row per primary key",
		Long: `Dedupe rewrites a model's committed set to one row per primary key (the newest by modified-at and
_hw_version), in one commit that swaps its inputs for its outputs. Memory stays under --memory-limit;
the rest spills to local disk. The output is laid out in key-hash buckets, so a later dedupe rewrites
only the buckets that new rows touch.`,
		Example: `  highwater dedupe --dest file:///data/lake --model orders
  highwater dedupe --dest s3://lake/raw --model orders --memory-limit 1GiB --temp-dir /scratch`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var (
		memLimit   = fs.String("memory-limit", "256MiB", "keep memory under this `size`; the rest spills to local disk")
		targetSize = fs.String("target-file-size", "128MiB", "roll output files at this `size`")
		keepTomb   = fs.Bool("keep-tombstones", false, "keep every winning tombstone, not only those within the lookback")
		lookback   = fs.Duration("lookback", 0, "keep tombstones this far below the watermark (default: the last export's lookback, else 30s)")
		tempDir    = fs.String("temp-dir", "", "`dir`ectory for spill files (default: the system's temp dir)")
		compress   = fs.String("compression", "", "Parquet page `codec` of the output: zstd, snappy, gzip or none (default: the lake's, as its newest committed file has it)")
		metricsOut = fs.String("metrics-file", "", "write the run's figures to this `file` in Prometheus text format (node_exporter's textfile collector)")
	)
	var ff fleetFlags
	ff.registerLake(fs)
	fs.BoolVar(&ff.json, "json", false, "print the result as one JSON object (docs/cli.md); with --config, one per model instance and the summary")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// The figures of every instance, written once at the end: a fleet
		// writes one metrics file.
		var figsMu sync.Mutex
		var figs []runFigures
		err := ff.runLake(cmd.Context(), env, &lake, func(ctx context.Context, env *environment, lake *lakeFlags) error {
			if err := lake.check(true); err != nil {
				return err
			}
			opts := dedupe.Options{Model: lake.model, KeepTombstones: *keepTomb, TempDir: *tempDir, Logger: env.logger, Failpoint: env.failpoint(),
				Compression: *compress, Build: env.build.formats()}
			if _, err := formats.NewCodec(opts.Compression); err != nil {
				return usageErr("--compression: %v", err)
			}
			var err error
			if opts.MemoryLimit, err = config.ParseSize(*memLimit); err != nil {
				return usageErr("--memory-limit: %v", err)
			}
			if opts.TargetFileBytes, err = config.ParseSize(*targetSize); err != nil {
				return usageErr("--target-file-size: %v", err)
			}
			if fs.Changed("lookback") {
				if *lookback < 0 {
					return usageErr("--lookback %s is negative", *lookback)
				}
				opts.Lookback = lookback
			}
			if err := opts.Validate(); err != nil {
				return usageErr("%v", err)
			}
			if err := checkMetricsFile(*metricsOut); err != nil {
				return err
			}
			d, err := lake.open(ctx, true)
			if err != nil {
				return err
			}
			defer d.Close()
			start := time.Now()
			var stop func()
			opts.Progress, stop = env.showProgress(lake.model, countRows)
			res, err := dedupe.Run(ctx, d, d.ObjectURL, opts)
			stop()
			if err == nil {
				err = publishViews(ctx, env, d, lake.model, "", nil)
			}
			if *metricsOut != "" {
				fig := runFigures{model: lake.model, tenant: lake.instanceTenant(), failed: err != nil}
				if err == nil && res.Commit != nil {
					fig.commit, fig.duration = res.Commit, time.Since(start)
				}
				figsMu.Lock()
				figs = append(figs, fig)
				figsMu.Unlock()
			}
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				env.logger.Warn(w)
			}
			if ff.json {
				return writeJSON(env.stdout, newDedupeJSON(lake.model, lake.instanceTenant(), res, time.Since(start)))
			}
			if res.Commit == nil {
				fmt.Fprintf(env.stdout, "%s: nothing to do: %s\n", lake.model, res.Reason)
				return nil
			}
			how := fmt.Sprintf("%d of %d buckets", res.BucketsTouched, res.Layout.Buckets)
			if res.FullRewrite {
				how = fmt.Sprintf("full rewrite into %d buckets", res.Layout.Buckets)
			}
			fmt.Fprintf(env.stdout, "%s: committed seq %d (dedupe, %s): %d rows in %d files -> %d rows in %d files (%d bytes), %.1fs\n",
				lake.model, res.Commit.Seq, how, res.InputRows, res.InputFiles, res.OutputRows, res.OutputFiles, res.OutputBytes, time.Since(start).Seconds())
			return nil
		}, nil)
		if len(figs) > 0 {
			if werr := writeMetricsFile(*metricsOut, "dedupe", figs); werr != nil {
				return errors.Join(err, werr)
			}
		}
		return err
	}
	return cmd
}
