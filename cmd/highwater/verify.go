package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/manifest"
)

// cmdVerify checks a model's committed state against the store (see
// manifest.Log.Verify). Each problem is printed on a line of its own; any
// makes it fail.
func cmdVerify(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every committed file against its commit",
		Long: `Verify checks a model's committed state against the store: that the log has no gap, that every
state checkpoint agrees with the commits it folds, that every committed file is there with the size
and sha256 its commit recorded, and that the checkpoint chains of unfinished runs are whole. Each
problem is printed on a line of its own; any makes it exit 1.`,
		Example: `  highwater verify --dest file:///data/lake --model orders`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var ff fleetFlags
	ff.registerLake(fs)
	fs.BoolVar(&ff.json, "json", false, "print the result as one JSON object (docs/cli.md); with --config, one per model instance and the summary")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return ff.runLake(cmd.Context(), env, &lake, func(ctx context.Context, env *environment, lake *lakeFlags) error {
			d, err := lake.open(ctx, true)
			if err != nil {
				return err
			}
			defer d.Close()
			problems, checked, err := manifest.NewLog(d, lake.model).Verify(ctx)
			if err != nil {
				return err
			}
			if ff.json {
				j := verifyJSON{Model: lake.model, Tenant: lake.instanceTenant(), OK: len(problems) == 0, Problems: append([]string{}, problems...)}
				if j.OK {
					j.Checked = checked
				}
				if err := writeJSON(env.stdout, j); err != nil {
					return err
				}
			} else {
				for _, p := range problems {
					fmt.Fprintf(env.stdout, "%s: %s\n", lake.model, p)
				}
			}
			if len(problems) > 0 {
				return fmt.Errorf("%d problems in the committed state of %s at %s (first: %s)", len(problems), lake.model, d, problems[0])
			}
			if !ff.json {
				fmt.Fprintf(env.stdout, "%s: ok, %s\n", lake.model, checked)
			}
			return nil
		}, nil)
	}
	return cmd
}
