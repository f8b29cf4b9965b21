package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/manifest"
)

func cmdVacuum(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("vacuum", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var (
		olderThan = fs.Duration("older-than", 0, "retention: only removals and dead runs older than this `duration` (e.g. 168h)")
		dryRun    = fs.Bool("dry-run", false, "list what would be deleted, change nothing")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *olderThan <= 0 {
		return usageErr("--older-than is required and must be positive")
	}
	d, err := lake.open(ctx, true)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := dedupe.Vacuum(ctx, d, dedupe.VacuumOptions{Model: lake.model, OlderThan: *olderThan, DryRun: *dryRun,
		Logger: env.logger, Failpoint: env.failpoint()})
	if err != nil {
		return err
	}
	log := manifest.NewLog(d, lake.model)
	verb := "deleted"
	if *dryRun {
		verb = "would delete"
		for _, r := range res.Declared {
			fmt.Fprintf(env.stdout, "would declare abandoned: %s\n", r)
		}
	}
	for _, k := range res.Deleted {
		fmt.Fprintf(env.stdout, "%s %s\n", verb, d.ObjectURL(log.Key(k)))
	}
	fmt.Fprintf(env.stdout, "%s: %s %d objects (%d bytes); %d runs or attempts declared abandoned\n",
		lake.model, verb, len(res.Deleted), res.Bytes, len(res.Declared))
	return nil
}
