package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/vacuum"
)

func cmdVacuum(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vacuum",
		Short: "Delete files that no commit needs any more",
		Long: `Vacuum deletes the files that a commit older than --older-than removed (replaced by a full refresh or
a dedupe), and the files of runs that it first declares abandoned in a commit of its own. It never
deletes a committed file, and never by age alone. A model published as Iceberg also has the snapshots
older than --older-than expired and the metadata no retained version names deleted. --dry-run lists
what would be deleted, the Iceberg metadata included.`,
		Example: `  highwater vacuum --dest file:///data/lake --model orders --older-than 168h --dry-run
  highwater vacuum --dest file:///data/lake --model orders --older-than 168h`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var (
		olderThan = fs.Duration("older-than", 0, "retention: only removals and dead runs older than this `duration` (e.g. 168h)")
		dryRun    = fs.Bool("dry-run", false, "list what would be deleted, change nothing")
	)
	var ff fleetFlags
	ff.registerLake(fs)
	fs.BoolVar(&ff.json, "json", false, "print the result as one JSON object (docs/cli.md); with --config, one per model instance and the summary")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return ff.runLake(cmd.Context(), env, &lake, func(ctx context.Context, env *environment, lake *lakeFlags) error {
			if *olderThan <= 0 {
				return usageErr("--older-than is required and must be positive")
			}
			d, err := lake.open(ctx, true)
			if err != nil {
				return err
			}
			defer d.Close()
			pr, stop := env.showProgress(lake.model, countObjects)
			now := time.Now()
			res, err := vacuum.Run(ctx, d, vacuum.Options{Model: lake.model, OlderThan: *olderThan, DryRun: *dryRun,
				Logger: env.logger, Failpoint: env.failpoint(), Progress: pr, Now: func() time.Time { return now },
				BeforeDelete: expireViews(env, d, lake.model, now.Add(-*olderThan))})
			stop()
			var metadata []string // of the Iceberg view
			switch {
			case err != nil:
			case *dryRun:
				metadata, err = vacuumableViews(ctx, d, lake.model, res.Deleted, now.Add(-*olderThan))
			default:
				err = publishViews(ctx, env, d, lake.model, "", nil)
				if err == nil {
					metadata = cleanViews(ctx, env, d, lake.model, now.Add(-*olderThan))
				}
			}
			if err != nil {
				return err
			}
			log := manifest.NewLog(d, lake.model)
			if ff.json {
				j := vacuumJSON{Model: lake.model, Tenant: lake.instanceTenant(), DryRun: *dryRun, Deleted: []string{}, Bytes: res.Bytes,
					DeclaredAbandoned: []string{}, Pruned: []string{}, IcebergMetadata: []string{}}
				for _, k := range res.Deleted {
					j.Deleted = append(j.Deleted, d.URL(log.Key(k)))
				}
				for _, k := range res.Pruned {
					j.Pruned = append(j.Pruned, d.URL(log.Key(k)))
				}
				for _, k := range metadata {
					j.IcebergMetadata = append(j.IcebergMetadata, d.URL(log.Key(k)))
				}
				j.DeclaredAbandoned = append(j.DeclaredAbandoned, res.Declared...)
				return writeJSON(env.stdout, j)
			}
			verb := "deleted"
			if *dryRun {
				verb = "would delete"
				for _, r := range res.Declared {
					fmt.Fprintf(env.stdout, "would declare abandoned: %s\n", escapedPath(r))
				}
			}
			// The keys come from listing the store, which may hold any
			// name: each is printed as files prints it, one escaped URL.
			for _, k := range slices.Concat(res.Deleted, res.Pruned, metadata) {
				fmt.Fprintf(env.stdout, "%s %s\n", verb, d.URL(log.Key(k)))
			}
			fmt.Fprintf(env.stdout, "%s: %s %d objects (%d bytes), %d run metadata objects and %d Iceberg metadata objects; %d runs or attempts declared abandoned\n",
				lake.model, verb, len(res.Deleted), res.Bytes, len(res.Pruned), len(metadata), len(res.Declared))
			return nil
		}, nil)
	}
	return cmd
}

// escapedPath is a run or "run/attempt" id, which comes from a key the
// store listed, escaped as a URL path escapes it: an id highwater made
// prints as it is, and any other name on one line, without a control
// character.
func escapedPath(id string) string {
	return (&url.URL{Path: id}).EscapedPath()
}
