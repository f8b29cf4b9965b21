package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/manifest"
)

func cmdVacuum(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("vacuum", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var (
		destURL   = fs.String("dest", "", "destination `URL`")
		model     = fs.String("model", "", "model `name`")
		tenant    = fs.String("tenant", "", "tenant `value` for a destination with a {tenant} placeholder")
		olderThan = fs.Duration("older-than", 0, "retention: only removals and dead runs older than this `duration` (e.g. 168h)")
		dryRun    = fs.Bool("dry-run", false, "list what would be deleted, change nothing")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *destURL == "" || *model == "" {
		return usageErr("--dest and --model are required")
	}
	if *olderThan <= 0 {
		return usageErr("--older-than is required and must be positive")
	}
	d, err := destination.Open(ctx, *destURL, *tenant)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := dedupe.Vacuum(ctx, d, dedupe.VacuumOptions{Model: *model, OlderThan: *olderThan, DryRun: *dryRun,
		Logger: env.logger, Failpoint: env.failpoint()})
	if err != nil {
		return err
	}
	log := manifest.NewLog(d, *model)
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
		*model, verb, len(res.Deleted), res.Bytes, len(res.Declared))
	return nil
}
