package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/internal/config"
)

func cmdConfig(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "config",
		Short:   "Check a config file",
		Long:    "Config holds the commands that work on a config file without connecting to anything.",
		Example: `  highwater config validate --config highwater.yaml`,
	}
	validate := &cobra.Command{
		Use:   "validate",
		Short: "Check a config file without connecting to anything",
		Long: `Validate parses a config file, expands its environment variables and checks every model and setting
as export would before connecting: unknown keys, missing fields, sizes, durations, codecs, time zones,
tenants and the destination URL. It connects to nothing and creates nothing.`,
		Example: `  highwater config validate --config highwater.yaml`,
		Args:    noArgs,
	}
	path := validate.Flags().String("config", "", "YAML config `file`")
	validate.RunE = func(cmd *cobra.Command, _ []string) error {
		if *path == "" {
			return usageErr("--config is required")
		}
		cfg, err := config.Load(*path)
		if err != nil {
			return usageErr("%v", err)
		}
		runs, err := selectModels(cfg, nil)
		if err != nil {
			return err
		}
		if cfg.Dest != "" {
			if err := checkFanOut(runs, cfg.Dest); err != nil {
				return err
			}
		}
		for i := range runs {
			o := &runs[i].opts
			if o.Compression == "" {
				o.Compression = "zstd"
			}
			if err := checkOptions(o, cfg.Dest); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(env.stdout, "%s: ok, %d models\n", *path, len(cfg.Models))
		return err
	}
	cmd.AddCommand(validate)
	return cmd
}
