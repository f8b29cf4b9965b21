package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/config"
	"github.com/highwater-dev/highwater/internal/fleet"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/reconcile"
	"github.com/highwater-dev/highwater/watermark"
)

func cmdReconcile(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Compare the lake with the source by key and value, and optionally repair it",
		Long: `Reconcile compares a model's source with the lake's committed set, read by dedupe's rule (the newest
version of each key; a winning tombstone removes it), by primary key and by a hash of every value. Each
key is missing (in the source, not in the lake), extra (in the lake, not in the source), changed (the
values differ: an update that forgot the modified-at column, say) or matched. --keys-only compares keys
and modified-at only. --window-start and --window-end judge only the rows whose modified-at lies in
[start, end), on either side.

Memory stays under --memory-limit whatever the size: both sides are spilled to local disk in key-hash
partitions. The source is read in keyset pages by primary key, each a short statement.

Every reconcile writes a commit of kind reconcile with what it found (status shows it). --repair adds, in
that commit, new versions of the missing and changed rows, read again from the source by key, and
tombstones of the extra keys; the watermark does not move. After a dedupe the lake equals the source.

The model is selected as export selects it: by flags, or with --config and --model (and --tenant).
Exit status 3 means differences were found.`,
		Example: `  highwater reconcile --source postgres://db/app --table public.orders --primary-key id \
      --modified-at updated_at --dest s3://lake/raw
  highwater reconcile --config highwater.yaml --model orders --json
  highwater reconcile --config highwater.yaml --model orders --repair && highwater dedupe --config highwater.yaml --model orders`,
	}
	fs := cmd.Flags()
	var sel modelSelection
	sel.register(fs)
	var (
		keysOnly = fs.Bool("keys-only", false, "compare keys and modified-at only, not the other values")
		repair   = fs.Bool("repair", false, "write new versions of missing and changed rows and tombstones of extra keys, in the reconcile's commit")
		winStart = fs.String("window-start", "", "judge only rows whose modified-at is at or after this value")
		winEnd   = fs.String("window-end", "", "judge only rows whose modified-at is before this value")
		memLimit = fs.String("memory-limit", "256MiB", "keep memory under this `size`; the rest spills to local disk")
		tempDir  = fs.String("temp-dir", "", "`dir`ectory for spill files (default: the system's temp dir)")
		pageRows = fs.Int("page-rows", reconcile.DefaultPageRows, "the most rows of a keyset page of the source (a page also ends at about 64 MiB of rows)")
	)
	var ff fleetFlags
	fs.StringArrayVar(&ff.tenants, "tenant", nil, "tenant `value`; with --config, the tenants to reconcile (repeat for several)")
	ff.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		set := setFlags(fs)
		shard, err := ff.check()
		if err != nil {
			return err
		}
		jobs, sourceURL, destURL, err := sel.jobs(env, set, ff.tenants)
		if err != nil {
			return err
		}
		tmpl := reconcile.Options{KeysOnly: *keysOnly, Repair: *repair, WindowStart: *winStart, WindowEnd: *winEnd, TempDir: *tempDir,
			PageRows: *pageRows, Logger: env.logger, Failpoint: env.failpoint(), Build: env.build.formats()}
		if tmpl.MemoryLimit, err = config.ParseSize(*memLimit); err != nil {
			return usageErr("--memory-limit: %v", err)
		}
		if *pageRows <= 0 {
			return usageErr("--page-rows %d: a page needs at least one row", *pageRows)
		}
		tmpl.Model = "-" // checked per instance below
		if err := tmpl.Validate(); err != nil {
			return usageErr("%v", err)
		}
		for _, j := range jobs {
			if err := checkOptions(&j.opts, destURL); err != nil {
				return err
			}
		}
		return runReconciles(ctx, env, &ff, shard, ff.fleetMode(set, jobs), sourceURL, destURL, jobs, tmpl)
	}
	return cmd
}

// modelSelection is how export, and the commands that read a model's
// source as export does (reconcile), name the model: by flags, or from a
// config file with --model.
type modelSelection struct {
	config, source, table, query, pk, modifiedAt, dest, tenantCol, timeZone string
	models                                                                  []string
}

func (s *modelSelection) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.config, "config", "", "YAML config `file` with several models")
	fs.StringSliceVar(&s.models, "model", nil, "model `name` (default: the table name without its schema); with --config, the models (comma-separated or repeated)")
	fs.StringVar(&s.source, "source", "", "PostgreSQL `URL` (default $HIGHWATER_SOURCE); PGPASSWORD and ~/.pgpass work")
	fs.StringVar(&s.table, "table", "", "source `SCHEMA.TABLE`")
	fs.StringVar(&s.query, "source-query", "", "custom `SQL` instead of a table")
	fs.StringVar(&s.pk, "primary-key", "", "primary key `COL[,COL]`")
	fs.StringVar(&s.modifiedAt, "modified-at", "", "modified-at `COL`umn (timestamptz, timestamp or date)")
	fs.StringVar(&s.dest, "dest", "", "destination `URL`")
	fs.StringVar(&s.tenantCol, "tenant-column", "", "tenant `COL`umn")
	fs.StringVar(&s.timeZone, "time-zone", "", "time `zone` of a naive timestamp column (default: the database's)")
}

// jobs resolves the selection into model instances (a tenants_query's are
// resolved once connected), with the source and destination URLs.
func (s *modelSelection) jobs(env *environment, set map[string]bool, tenants []string) ([]job, string, string, error) {
	jobs, sourceURL, destURL, err := s.instances(set, tenants)
	if err != nil {
		return nil, "", "", err
	}
	if sourceURL, destURL, err = s.urls(env, jobs, sourceURL, destURL); err != nil {
		return nil, "", "", err
	}
	return jobs, sourceURL, destURL, nil
}

// instances resolves the selection into model instances, with the source and
// destination URLs the flags or the config give (either may be empty).
// configOnly names the command's further flags that go in the config file.
func (s *modelSelection) instances(set map[string]bool, tenants []string, configOnly ...string) ([]job, string, string, error) {
	var jobs []job
	sourceURL, destURL := s.source, s.dest
	if s.config != "" {
		for _, name := range append([]string{"table", "source-query", "primary-key", "modified-at", "tenant-column"}, configOnly...) {
			if set[name] {
				return nil, "", "", usageErr("--%s goes in the config file, not with --config", name)
			}
		}
		cfg, err := config.Load(s.config)
		if err != nil {
			return nil, "", "", usageErr("%v", err)
		}
		if sourceURL == "" {
			sourceURL = cfg.Source
		}
		if destURL == "" {
			destURL = cfg.Dest
		}
		if jobs, err = selectModels(cfg, s.models); err != nil {
			return nil, "", "", err
		}
		if jobs, err = selectTenants(jobs, tenants, !slices.ContainsFunc(jobs, func(j job) bool { return j.tenantsQuery != "" })); err != nil {
			return nil, "", "", err
		}
		return jobs, sourceURL, destURL, nil
	}
	if s.table == "" && s.query == "" {
		return nil, "", "", usageErr("--table (or --source-query) is required")
	}
	if s.pk == "" || s.modifiedAt == "" {
		return nil, "", "", usageErr("--primary-key and --modified-at are required")
	}
	if len(s.models) > 1 {
		return nil, "", "", usageErr("--model takes one name without --config")
	}
	name := ""
	if len(s.models) == 1 {
		name = s.models[0]
	}
	if name == "" {
		if s.table == "" {
			return nil, "", "", usageErr("--model is required with --source-query")
		}
		name = defaultModelName(s.table)
	}
	o := export.Options{Model: name, Lookback: watermark.DefaultLookback, TimeZone: s.timeZone}
	o.Source = pgsource.Spec{Table: s.table, Query: s.query, PrimaryKey: splitList(s.pk), ModifiedAt: s.modifiedAt, TenantColumn: s.tenantCol}
	switch len(tenants) {
	case 0:
	case 1:
		o.Source.Tenant = &tenants[0]
	default:
		return nil, "", "", usageErr("--tenant takes one value without --config")
	}
	jobs = append(jobs, job{inst: fleet.Instance{Model: name, Tenant: o.Source.Tenant}, opts: o})
	return jobs, sourceURL, destURL, nil
}

// urls completes the source and destination URLs ($HIGHWATER_SOURCE for
// the source) and checks that the destination can hold the instances.
func (s *modelSelection) urls(env *environment, jobs []job, sourceURL, destURL string) (string, string, error) {
	if sourceURL == "" {
		sourceURL = env.getenv("HIGHWATER_SOURCE")
	}
	if sourceURL == "" {
		return "", "", usageErr("--source is required (or $HIGHWATER_SOURCE, or source: in the config)")
	}
	if destURL == "" {
		return "", "", usageErr("--dest is required")
	}
	if err := checkFanOut(jobs, destURL); err != nil {
		return "", "", err
	}
	return sourceURL, destURL, nil
}

// runReconciles runs the reconcile of each instance, as runExports runs
// exports: a single instance returns its own error (errDifferences when
// the lake differs); several print a summary.
func runReconciles(ctx context.Context, env *environment, ff *fleetFlags, shard fleet.Shard, summary bool,
	sourceURL, destURL string, jobs []job, tmpl reconcile.Options) error {
	do := func(ctx context.Context, f *fanOut, slot, i int, j job) (string, error) {
		pool, outMu := f.pool, &f.outMu
		o := tmpl
		o.Model, o.Source = j.opts.Model, j.opts.Source
		o.Logger = j.logger(o.Logger)
		src, d, err := f.open(ctx, slot, destURL, j)
		if err != nil {
			return "", err
		}
		defer d.Close()
		start := time.Now()
		var stop func()
		o.Progress, stop = ff.showProgress(env, j, countRowsRead)
		res, err := reconcile.Run(ctx, src, d, d.ObjectURL, o)
		stop()
		var tenant *string
		if summary {
			tenant = j.inst.Tenant
		}
		outMu.Lock()
		var werr error
		if ff.json {
			werr = writeJSON(env.stdout, newReconcileJSON(o.Model, tenant, res, err, time.Since(start)))
		} else if err == nil {
			werr = writeReconcileText(env.stdout, j.inst.String(), res)
		}
		outMu.Unlock()
		if err != nil {
			pool.drop(ctx, slot)
			return "", err
		}
		if werr != nil {
			return "", werr
		}
		for _, w := range res.Warnings {
			o.Logger.Warn(w)
		}
		if !res.Equal() {
			r := res.Report
			return "", fmt.Errorf("%w: %d missing, %d extra, %d changed keys", errDifferences, r.Missing, r.Extra, r.Changed)
		}
		return fmt.Sprintf("equal, %d keys", res.Report.Matched), nil
	}
	s, err := runInstances(ctx, env, ff, shard, sourceURL, jobs, do)
	if err != nil {
		return err
	}
	if !summary {
		if o := s.Outcomes[0]; o.Status != fleet.Done {
			return o.Err
		}
		return nil
	}
	return reportSummary(env.stdout, s, ff.json)
}

// countRowsRead counts the rows read on both sides.
var countRowsRead = progressKind{unit: "rows", verb: "read"}

// reconcileJSON is one model instance's reconcile (docs/cli.md).
type reconcileJSON struct {
	Model           string     `json:"model"`
	Tenant          *string    `json:"tenant,omitempty"`
	Seq             int64      `json:"seq"`
	Equal           bool       `json:"equal"`
	Matched         int64      `json:"matched"`
	Missing         int64      `json:"missing"`
	Extra           int64      `json:"extra"`
	Changed         int64      `json:"changed"`
	MissingKeys     [][]string `json:"missing_keys"`
	ExtraKeys       [][]string `json:"extra_keys"`
	ChangedKeys     [][]string `json:"changed_keys"`
	KeysOnly        bool       `json:"keys_only"`
	WindowStart     *string    `json:"window_start"`
	WindowEnd       *string    `json:"window_end"`
	Repaired        bool       `json:"repaired"`
	RepairedRows    int64      `json:"repaired_rows"`
	Tombstones      int64      `json:"tombstones"`
	Unrepaired      int64      `json:"unrepaired"`
	FilesAdded      int        `json:"files_added"`
	SourceRows      int64      `json:"source_rows"`
	LakeRows        int64      `json:"lake_rows"`
	DurationSeconds float64    `json:"duration_seconds"`
	Warnings        []string   `json:"warnings"`
}

func newReconcileJSON(model string, tenant *string, res *reconcile.Result, err error, took time.Duration) any {
	if err != nil {
		return exportErrorJSON{Model: model, Tenant: tenant, Error: oneLine(err.Error())}
	}
	r := res.Report
	j := reconcileJSON{Model: model, Tenant: tenant, Seq: res.Commit.Seq, Equal: res.Equal(), Matched: r.Matched, Missing: r.Missing,
		Extra: r.Extra, Changed: r.Changed, MissingKeys: r.MissingKeys, ExtraKeys: r.ExtraKeys, ChangedKeys: r.ChangedKeys,
		KeysOnly: r.KeysOnly, WindowStart: r.WindowStart, WindowEnd: r.WindowEnd, Repaired: r.Repaired, RepairedRows: r.RepairedRows,
		Tombstones: r.Tombstones, Unrepaired: r.Unrepaired, FilesAdded: len(res.Commit.Added), SourceRows: res.SourceRows, LakeRows: res.LakeRows,
		DurationSeconds: took.Seconds(), Warnings: []string{}}
	if res.Warnings != nil {
		j.Warnings = res.Warnings
	}
	return j
}

// keyList prints sample keys: a key of one column as its literal, a
// composite one in parentheses.
func keyList(keys [][]string, total int64) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k[0]
		if len(k) > 1 {
			parts[i] = "(" + strings.Join(k, ", ") + ")"
		}
	}
	s := strings.Join(parts, ", ")
	if total > int64(len(keys)) {
		s += fmt.Sprintf(", ... (%d more)", total-int64(len(keys)))
	}
	return s
}

func writeReconcileText(w io.Writer, label string, res *reconcile.Result) error {
	r := res.Report
	var b strings.Builder
	what := "keys and values"
	if r.KeysOnly {
		what = "keys and modified-at"
	}
	if r.WindowStart != nil || r.WindowEnd != nil {
		what += fmt.Sprintf(" with modified-at in [%s, %s)", derefOpen(r.WindowStart, "-infinity"), derefOpen(r.WindowEnd, "infinity"))
	}
	if res.Equal() {
		fmt.Fprintf(&b, "%s: equal to the source: %d keys matched (%s), committed seq %d\n", label, r.Matched, what, res.Commit.Seq)
	} else {
		fmt.Fprintf(&b, "%s: differs from the source (%s): %d matched, %d missing, %d extra, %d changed; committed seq %d\n",
			label, what, r.Matched, r.Missing, r.Extra, r.Changed, res.Commit.Seq)
		for _, k := range []struct {
			name  string
			keys  [][]string
			total int64
		}{{"missing", r.MissingKeys, r.Missing}, {"extra", r.ExtraKeys, r.Extra}, {"changed", r.ChangedKeys, r.Changed}} {
			if k.total > 0 {
				fmt.Fprintf(&b, "  %-8s %s\n", k.name+":", keyList(k.keys, k.total))
			}
		}
	}
	if r.Repaired {
		fmt.Fprintf(&b, "  repaired: %d rows written again, %d tombstones, in %d files; run dedupe to fold them in\n", r.RepairedRows, r.Tombstones, len(res.Commit.Added))
		if r.Unrepaired > 0 {
			fmt.Fprintf(&b, "  not repaired: %d keys whose source modified-at is older than the lake's (see the warnings)\n", r.Unrepaired)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func derefOpen(s *string, open string) string {
	if s == nil {
		return open
	}
	return *s
}
