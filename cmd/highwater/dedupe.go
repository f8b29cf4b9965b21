package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/config"
)

func cmdDedupe(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("dedupe", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var (
		memLimit   = fs.String("memory-limit", "256MiB", "keep memory under this `size`; the rest spills to local disk")
		targetSize = fs.String("target-file-size", "128MiB", "roll output files at this `size`")
		keepTomb   = fs.Bool("keep-tombstones", false, "keep every winning tombstone, not only those within the lookback")
		lookback   = fs.Duration("lookback", -1, "keep tombstones this far below the watermark (default: the last export's lookback, else 30s)")
		tempDir    = fs.String("temp-dir", "", "`dir`ectory for spill files (default: the system's temp dir)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if lake.model == "" {
		return usageErr("--dest and --model are required")
	}
	opts := dedupe.Options{Model: lake.model, KeepTombstones: *keepTomb, TempDir: *tempDir, Logger: env.logger, Failpoint: env.failpoint()}
	var err error
	if opts.MemoryLimit, err = config.ParseSize(*memLimit); err != nil {
		return usageErr("--memory-limit: %v", err)
	}
	if opts.TargetFileBytes, err = config.ParseSize(*targetSize); err != nil {
		return usageErr("--target-file-size: %v", err)
	}
	if *lookback >= 0 {
		opts.Lookback = lookback
	}
	if err := opts.Validate(); err != nil {
		return usageErr("%v", err)
	}
	d, err := lake.open(ctx, true)
	if err != nil {
		return err
	}
	defer d.Close()
	start := time.Now()
	res, err := dedupe.Run(ctx, d, opts)
	if err != nil {
		return err
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
	for _, w := range res.Warnings {
		env.logger.Warn(w)
	}
	return nil
}
