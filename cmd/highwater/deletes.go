package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

// cmdDeletes manages the delete log that export --delete-log reads
// (docs/deletes.md).
func cmdDeletes(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deletes",
		Short: "Install, inspect and prune the delete log that export --delete-log reads",
		Long: `A modified-at column cannot see a hard delete. The delete log is a table in the source's schema
highwater, filled by triggers that highwater installs on a table: each deleted row (and each row whose
key an UPDATE changed) leaves its key, its tenant's value and the time of the delete; each TRUNCATE
leaves a marker. export --delete-log reads the entries of its interval and writes them as tombstones.
Pruning deletes old entries and records the horizon up to which entries may be gone; a run whose lower
bound lies below it stops and asks for a full refresh (docs/deletes.md).`,
		Example: `  highwater deletes install --source postgres://admin@db/app --table public.orders
  highwater deletes status --source postgres://admin@db/app
  highwater deletes prune --source postgres://admin@db/app --older-than 168h`,
	}
	cmd.AddCommand(cmdDeletesInstall(env), cmdDeletesUninstall(env), cmdDeletesStatus(env), cmdDeletesPrune(env))
	return cmd
}

// withSource connects to the source of --source (or $HIGHWATER_SOURCE).
func withSource(ctx context.Context, env *environment, url string, fn func(*pgsource.Source) error) error {
	if url == "" {
		url = env.getenv("HIGHWATER_SOURCE")
	}
	if url == "" {
		return usageErr("--source is required (or $HIGHWATER_SOURCE)")
	}
	src, err := pgsource.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer src.Close(context.WithoutCancel(ctx))
	return fn(src)
}

func cmdDeletesInstall(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Create the delete log and its triggers on a table (idempotent)",
		Long: `Install creates, if they are not there, the schema highwater with the delete log, and on the table an
AFTER DELETE row trigger, an AFTER UPDATE trigger for changed keys and a TRUNCATE trigger. Running it
again replaces the triggers (e.g. with another key) and keeps the entries and the horizon. The role
needs CREATE on the database and TRIGGER on the table (its owner has both). Deletes are recorded from
then on: a model that turns --delete-log on runs a --full-refresh first.`,
		Example: `  highwater deletes install --source postgres://admin@db/app --table public.orders
  highwater deletes install --source postgres://admin@db/app --table public.order_lines \
      --primary-key order_id,line --tenant-column account_id`,
	}
	fs := cmd.Flags()
	source := fs.String("source", "", "PostgreSQL `URL` (default $HIGHWATER_SOURCE)")
	table := fs.String("table", "", "source `SCHEMA.TABLE`")
	pk := fs.String("primary-key", "", "the model's key `COL[,COL]` (default: the table's primary key)")
	tenantCol := fs.String("tenant-column", "", "tenant `COL`umn whose value each entry records, for tenant models")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *table == "" {
			return usageErr("--table is required")
		}
		return withSource(cmd.Context(), env, *source, func(src *pgsource.Source) error {
			t, err := src.InstallDeleteLog(cmd.Context(), pgsource.InstallSpec{Table: *table, PrimaryKey: splitList(*pk), TenantColumn: *tenantCol})
			if err != nil {
				return err
			}
			tenant := ""
			if t.TenantColumn != "" {
				tenant = ", tenant column " + t.TenantColumn
			}
			fmt.Fprintf(env.stdout, "%s: delete log installed (key %s%s; triggers %s)\n", t.Relation, strings.Join(t.KeyColumns, ", "), tenant, strings.Join(t.Triggers, ", "))
			return nil
		})
	}
	return cmd
}

func cmdDeletesUninstall(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove a table's delete log triggers and entries",
		Long: `Uninstall drops the table's triggers and trigger function, and deletes its entries and registration.
The schema highwater stays for the other tables. A model exported with --delete-log then fails until
its config drops delete_log and it runs a --full-refresh.`,
		Example: `  highwater deletes uninstall --source postgres://admin@db/app --table public.orders`,
	}
	fs := cmd.Flags()
	source := fs.String("source", "", "PostgreSQL `URL` (default $HIGHWATER_SOURCE)")
	table := fs.String("table", "", "source `SCHEMA.TABLE`")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *table == "" {
			return usageErr("--table is required")
		}
		return withSource(cmd.Context(), env, *source, func(src *pgsource.Source) error {
			rel, err := src.UninstallDeleteLog(cmd.Context(), *table)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "%s: delete log removed\n", rel)
			return nil
		})
	}
	return cmd
}

func cmdDeletesStatus(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "Show the tables with a delete log, its size, oldest entry and pruning horizon",
		Example: `  highwater deletes status --source postgres://admin@db/app`,
	}
	fs := cmd.Flags()
	source := fs.String("source", "", "PostgreSQL `URL` (default $HIGHWATER_SOURCE)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withSource(cmd.Context(), env, *source, func(src *pgsource.Source) error {
			st, err := src.DeleteLogStatus(cmd.Context())
			if err != nil {
				return err
			}
			if !st.Installed {
				fmt.Fprintln(env.stdout, "no delete log is installed in this database")
				return nil
			}
			fmt.Fprintf(env.stdout, "delete log: %d tables, %s\n", len(st.Tables), humanize.IBytes(uint64(st.Bytes)))
			tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tKEY\tTENANT\tTRIGGERS\tENTRIES\tTRUNCATES\tOLDEST\tPRUNED TO")
			for _, t := range st.Tables {
				triggers := "ok"
				if len(t.Triggers) < 3 {
					triggers = fmt.Sprintf("%d of 3: reinstall", len(t.Triggers))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.Relation, strings.Join(t.KeyColumns, ","), orDash(t.TenantColumn),
					triggers, t.Entries, t.Truncates, timeOrDash(t.Oldest), timeOrDash(t.PrunedTo))
			}
			return tw.Flush()
		})
	}
	return cmd
}

func cmdDeletesPrune(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete old delete log entries and record the horizon",
		Long: `Prune deletes the entries older than --older-than and records that time as the horizon of every
table's log, in one transaction. A later run whose lower bound (its watermark minus the lookback) lies
below the horizon stops and asks for a --full-refresh, since deletes in between may be gone: choose
--older-than well above the longest time a model may go without an export (docs/deletes.md).`,
		Example: `  highwater deletes prune --source postgres://admin@db/app --older-than 168h`,
	}
	fs := cmd.Flags()
	source := fs.String("source", "", "PostgreSQL `URL` (default $HIGHWATER_SOURCE)")
	olderThan := fs.Duration("older-than", 0, "delete entries older than this `duration` (e.g. 168h)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *olderThan <= 0 {
			return usageErr("--older-than is required and must be positive")
		}
		return withSource(cmd.Context(), env, *source, func(src *pgsource.Source) error {
			horizon, n, err := src.PruneDeleteLog(cmd.Context(), *olderThan)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "delete log pruned up to %s: %d entries deleted\n", horizon.UTC().Format(time.RFC3339Nano), n)
			return nil
		})
	}
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
