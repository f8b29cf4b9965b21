package main

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/highwater-dev/highwater/iceberg"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/redact"
	"github.com/highwater-dev/highwater/manifest"
)

// checkTableFormat refuses, before anything is touched, a table format
// highwater does not publish.
func checkTableFormat(f string) error {
	if f != "" && f != manifest.TableFormatIceberg {
		return usageErr("--table-format %q: the one table format is iceberg", f)
	}
	return nil
}

// publishViews brings the table formats of a model up to its log. Every
// command that commits calls it after the library call returns, so that a
// view left behind by a process that died between its commit and its
// snapshot is repaired by the next command. optIn is a format the command
// was asked to start publishing (--table-format, table_format:), which the
// log then records. st is the state the command's commit left (nil: read
// it now); the view is brought up to it.
func publishViews(ctx context.Context, env *environment, d *destination.Destination, model, optIn string, st *manifest.State) error {
	log := manifest.NewLog(d, model)
	var err error
	if st == nil {
		if st, err = log.ReadState(ctx); err != nil {
			return fmt.Errorf("read the state of %s: %w", model, err)
		}
	}
	if optIn == manifest.TableFormatIceberg && !st.Publishes(optIn) && st.Seq > 0 {
		if st, err = iceberg.Enable(ctx, log); err != nil {
			return fmt.Errorf("publish %s as Iceberg: %w", model, err)
		}
	}
	if !st.Publishes(manifest.TableFormatIceberg) {
		return nil
	}
	if fp := env.failpoint(); fp != nil {
		fp("iceberg-before-sync")
	}
	start := time.Now()
	res, err := iceberg.NewView(log, d.ObjectURL(log.Key())).Sync(ctx, st)
	if err != nil {
		return fmt.Errorf("publish seq %d of %s as an Iceberg snapshot (the commit stands; the next command or highwater iceberg sync publishes it): %w", st.Seq, model, err)
	}
	if res.Published > 0 {
		env.logger.Info("published the Iceberg view", "model", model, "from_seq", res.From, "to_seq", res.To,
			"versions", res.Published, "metadata", res.MetadataURL, "seconds", time.Since(start).Seconds())
	}
	return nil
}

// expireViews is vacuum's BeforeDelete for the log at d: a model published
// as Iceberg has its view brought to st and the snapshots that name doomed
// files expired, before vacuum deletes them.
func expireViews(env *environment, d *destination.Destination, model string, cutoff time.Time) func(context.Context, *manifest.State, []string) error {
	return func(ctx context.Context, st *manifest.State, doomed []string) error {
		if !st.Publishes(manifest.TableFormatIceberg) {
			return nil
		}
		v := iceberg.NewView(manifest.NewLog(d, model), d.ObjectURL(manifest.NewLog(d, model).Key()))
		if _, err := v.Sync(ctx, st); err != nil {
			return fmt.Errorf("bring the Iceberg view up to seq %d: %w", st.Seq, err)
		}
		n, err := v.Expire(ctx, st, doomed, cutoff)
		if err != nil {
			return err
		}
		if n > 0 {
			env.logger.Info("expired Iceberg snapshots", "model", model, "snapshots", n)
		}
		return nil
	}
}

// cleanViews is the end of a vacuum of a model published as Iceberg, once
// its view is up to date: it expires the snapshots older than the
// retention (as expireViews does when vacuum deletes files), then deletes
// the metadata that no retained version of the view names, and returns
// the keys it deleted. A clean that fails loses nothing (the next vacuum
// finds the same files), so it warns and the vacuum stands.
func cleanViews(ctx context.Context, env *environment, d *destination.Destination, model string, cutoff time.Time) []string {
	log := manifest.NewLog(d, model)
	st, err := log.ReadState(ctx)
	if err != nil || !st.Publishes(manifest.TableFormatIceberg) {
		return nil
	}
	v := iceberg.NewView(log, d.ObjectURL(log.Key()))
	var deleted []string
	if _, err = v.Expire(ctx, st, nil, cutoff); err == nil {
		deleted, err = v.Clean(ctx, cutoff)
	}
	if err != nil {
		env.logger.Warn("delete the unreferenced Iceberg metadata (the next vacuum tries again)", "model", model, "error", err.Error())
	}
	if len(deleted) > 0 {
		env.logger.Info("deleted unreferenced Iceberg metadata", "model", model, "objects", len(deleted))
	}
	return deleted
}

// vacuumableViews is the dry run of expireViews and cleanViews: the
// metadata of the model's Iceberg view that a vacuum deleting doomed would
// delete, decided by what decides the real run's (iceberg's Vacuumable).
func vacuumableViews(ctx context.Context, d *destination.Destination, model string, doomed []string, cutoff time.Time) ([]string, error) {
	log := manifest.NewLog(d, model)
	st, err := log.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the state of %s: %w", model, err)
	}
	if !st.Publishes(manifest.TableFormatIceberg) {
		return nil, nil
	}
	keys, err := iceberg.NewView(log, d.ObjectURL(log.Key())).Vacuumable(ctx, st, doomed, cutoff)
	if err != nil {
		return nil, fmt.Errorf("list the Iceberg metadata a vacuum of %s would delete: %w", model, err)
	}
	return keys, nil
}

func cmdIceberg(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "iceberg",
		Short: "Publish models as Apache Iceberg tables",
		Long: `A model exported with --table-format iceberg (table_format: iceberg in the config) is also an Apache
Iceberg table at <dest>/<model>/, with metadata/ beside data/: each commit of the log that changes the
table (its files or its schema) is one snapshot. Every command that commits publishes it; sync brings a
view that lags (or was lost) up to the log's head, and register points a catalog at it (docs/readers.md).`,
		Example: `  highwater export --source postgres://exporter@db/app --table public.orders \
      --primary-key id --modified-at updated_at --dest s3://lake/prod --table-format iceberg
  highwater iceberg sync --dest s3://lake/prod --model orders
  highwater iceberg register --dest s3://lake/prod --model orders --catalog postgres://iceberg@catalog-db/iceberg`,
	}
	cmd.AddCommand(cmdIcebergSync(env), cmdIcebergRegister(env))
	return cmd
}

func cmdIcebergSync(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Bring a model's Iceberg view up to its log",
		Long: `Sync publishes, as Iceberg snapshots, the commits of the log that the model's Iceberg view lacks: one
snapshot per commit that changes the table, or one snapshot of the whole committed set when the view does not exist yet or was
lost (delete <dest>/<model>/metadata/ to rebuild it). --enable starts publishing a model that its
exports did not opt in, and records that in the log.`,
		Example: `  highwater iceberg sync --dest s3://lake/prod --model orders
  highwater iceberg sync --dest file:///data/lake --model orders --enable`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var ff fleetFlags
	ff.registerLake(fs)
	enable := fs.Bool("enable", false, "publish the model as Iceberg from now on, and record that in its log")
	var cat catalogFlags
	cat.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cat.check(); err != nil {
			return err
		}
		return ff.runLake(cmd.Context(), env, &lake, func(ctx context.Context, env *environment, lake *lakeFlags) error {
			d, err := lake.open(ctx, true)
			if err != nil {
				return err
			}
			defer d.Close()
			log := manifest.NewLog(d, lake.model)
			st, err := log.ReadState(ctx)
			if err != nil {
				return err
			}
			if st.Seq == 0 {
				return fmt.Errorf("model %s has no commits at %s", lake.model, d)
			}
			if !st.Publishes(manifest.TableFormatIceberg) {
				if !*enable {
					return fmt.Errorf("model %s is not published as Iceberg: export it with --table-format iceberg, or sync with --enable", lake.model)
				}
				if st, err = iceberg.Enable(ctx, log); err != nil {
					return err
				}
			}
			v := iceberg.NewView(log, d.ObjectURL(log.Key()))
			res, err := v.Sync(ctx, st)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "%s: Iceberg view at seq %d (was %d), %d metadata versions written: %s\n",
				lake.model, res.To, res.From, res.Published, res.MetadataURL)
			if cat.url != "" {
				if _, err := cat.point(ctx, v, lake.model, res.MetadataURL); err != nil {
					return err
				}
			}
			return nil
		}, nil)
	}
	return cmd
}

// catalogFlags name a catalog entry for a model's Iceberg view.
type catalogFlags struct {
	url, name, namespace, table string
}

func (c *catalogFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.url, "catalog", "", "Iceberg SQL catalog: a PostgreSQL `URL` holding the JDBC catalog's tables")
	fs.StringVar(&c.name, "catalog-name", "highwater", "the catalog's `name`, as engines configure it")
	fs.StringVar(&c.namespace, "namespace", "default", "the table's `namespace` in the catalog")
	fs.StringVar(&c.table, "table", "", "the table's `name` in the catalog (default: the model's)")
}

// check refuses what needs no connection to refuse.
func (c *catalogFlags) check() error {
	if c.url == "" {
		return nil
	}
	u, err := url.Parse(c.url)
	if err != nil {
		return usageErr("--catalog %s: %v", redact.URL(c.url), err)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
	default:
		return usageErr("--catalog %s: only an Iceberg SQL catalog in PostgreSQL (postgres://...) is supported; point a REST or Glue catalog at the metadata file that iceberg sync prints", redact.URL(c.url))
	}
	if c.name == "" || c.namespace == "" {
		return usageErr("--catalog-name and --namespace must not be empty")
	}
	return nil
}

// point moves the catalog entry of v to metadataURL.
func (c *catalogFlags) point(ctx context.Context, v *iceberg.View, model, metadataURL string) (bool, error) {
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		return false, fmt.Errorf("connect to the catalog %s: %w", redact.URL(c.url), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return v.RegisterSQL(ctx, conn, iceberg.Catalog{Name: c.name, Namespace: c.namespace, Table: cmp.Or(c.table, model)}, metadataURL)
}

func cmdIcebergRegister(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "register",
		Short: "Register a model's Iceberg table in a catalog",
		Long: `Register brings the model's Iceberg view up to its log, then points the catalog's entry for it at the
newest metadata version: it creates the JDBC catalog's tables (iceberg_tables,
iceberg_namespace_properties) and the entry when missing, and otherwise moves the entry with the
catalog's own conditional update. Engines that use the catalog then read the table by name. Rerun it
(or iceberg sync --catalog) after later commits to move the entry on; an entry that lags names an
older snapshot, never a broken one while vacuum keeps the retention.`,
		Example: `  highwater iceberg register --dest s3://lake/prod --model orders \
      --catalog postgres://iceberg@catalog-db/iceberg --catalog-name lake --namespace prod`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var cat catalogFlags
	cat.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if cat.url == "" {
			return usageErr("--catalog is required")
		}
		if err := cat.check(); err != nil {
			return err
		}
		d, st, v, err := openPublishedView(ctx, &lake)
		if err != nil {
			return err
		}
		defer d.Close()
		res, err := v.Sync(ctx, st)
		if err != nil {
			return err
		}
		moved, err := cat.point(ctx, v, lake.model, res.MetadataURL)
		if err != nil {
			return err
		}
		verb := "already pointed at"
		if moved {
			verb = "now points at"
		}
		fmt.Fprintf(env.stdout, "%s: catalog %s entry %s.%s %s %s (seq %d)\n", lake.model, cat.name, cat.namespace,
			cmp.Or(cat.table, lake.model), verb, res.MetadataURL, res.To)
		return nil
	}
	return cmd
}

// openPublishedView opens the lake of a model that is published as Iceberg
// and reads its state, for the commands that only read or point at the
// view; sync, which may start publishing, checks on its own. The caller
// closes d.
func openPublishedView(ctx context.Context, lake *lakeFlags) (*destination.Destination, *manifest.State, *iceberg.View, error) {
	d, err := lake.open(ctx, true)
	if err != nil {
		return nil, nil, nil, err
	}
	log := manifest.NewLog(d, lake.model)
	st, err := log.ReadState(ctx)
	if err != nil {
		d.Close()
		return nil, nil, nil, err
	}
	if !st.Publishes(manifest.TableFormatIceberg) {
		d.Close()
		return nil, nil, nil, fmt.Errorf("model %s is not published as Iceberg: export it with --table-format iceberg, or run iceberg sync --enable", lake.model)
	}
	return d, st, iceberg.NewView(log, d.ObjectURL(log.Key())), nil
}

// icebergDDL prints what engine needs to read the model's Iceberg view. It
// changes nothing: a view that lags the log is named as it stands, with a
// warning.
func icebergDDL(ctx context.Context, env *environment, lake *lakeFlags, engine, name, format string) error {
	if err := checkTableFormat(format); err != nil {
		return err
	}
	if lake.dest == "" || lake.model == "" || engine == "" {
		return usageErr("--dest, --model and --engine are required")
	}
	if !slices.Contains(iceberg.Engines, engine) {
		return usageErr("unknown engine %q for an Iceberg table: use %s", engine, strings.Join(iceberg.Engines, ", "))
	}
	d, st, v, err := openPublishedView(ctx, lake)
	if err != nil {
		return err
	}
	defer d.Close()
	head, err := v.Head(ctx, st)
	if err != nil {
		return err
	}
	if head.Version == 0 {
		return fmt.Errorf("model %s has no Iceberg metadata yet: run highwater iceberg sync", lake.model)
	}
	if head.To < st.Seq {
		env.logger.Warn("the Iceberg view lags the log: run highwater iceberg sync", "model", lake.model, "view_seq", head.To, "log_seq", st.Seq)
	}
	out, err := iceberg.DDL(engine, cmp.Or(name, lake.model), v.Location(), head.MetadataURL)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(env.stdout, out)
	return err
}
