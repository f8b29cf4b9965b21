package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/highwater-dev/highwater/manifest"
)

// cmdVerify checks a model's committed state against the store (see
// manifest.Log.Verify). Each problem is printed on a line of its own; any
// makes it fail.
func cmdVerify(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var lake lakeFlags
	lake.register(fs, "model `name`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	d, err := lake.open(ctx, true)
	if err != nil {
		return err
	}
	defer d.Close()
	problems, checked, err := manifest.NewLog(d, lake.model).Verify(ctx)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(env.stdout, "%s: %s\n", lake.model, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems in the committed state of %s at %s (first: %s)", len(problems), lake.model, d, problems[0])
	}
	fmt.Fprintf(env.stdout, "%s: ok, %s\n", lake.model, checked)
	return nil
}
