package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/config"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/fleet"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/progress"
)

// job is one model instance to run, or, while tenantsQuery is set, the
// template of a model whose tenants a query names once connected.
type job struct {
	inst         fleet.Instance
	opts         export.Options
	tenantsQuery string
	// tableFormat is a table format to publish the model in too.
	tableFormat string
}

// fleetFlags select and schedule the instances of a config's models: the
// flags that every command working on several instances shares.
type fleetFlags struct {
	config   string // maintenance commands; export has its own --config
	tenants  []string
	parallel int
	shard    string
	json     bool
}

func (f *fleetFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.parallel, "parallel", 1, "run up to `N` model instances at once, over N source connections")
	fs.StringVar(&f.shard, "shard", "", "take only the instances of shard `I/N` (a stable hash of model and tenant, I mod N)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per model instance per line, and the summary as one (docs/cli.md)")
}

// registerLake adds the flags to a maintenance command, whose --tenant
// is lakeFlags' and whose --json is its own: the command sets f.json
// from it, so that a summary is printed as JSON too.
func (f *fleetFlags) registerLake(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "YAML config `file`: work on its models and their tenants (--model and --tenant select)")
	fs.IntVar(&f.parallel, "parallel", 1, "with --config, work on up to `N` model instances at once")
	fs.StringVar(&f.shard, "shard", "", "with --config, take only the instances of shard `I/N` (as export does)")
}

// check validates the flags; it needs no connection.
func (f *fleetFlags) check() (fleet.Shard, error) {
	if f.parallel < 1 {
		return fleet.Shard{}, usageErr("--parallel %d: at least one instance must run", f.parallel)
	}
	if f.shard == "" {
		return fleet.All, nil
	}
	s, err := fleet.ParseShard(f.shard)
	if err != nil {
		return fleet.Shard{}, usageErr("--shard: %v", err)
	}
	return s, nil
}

// fleetMode says whether the command reports a summary rather than the
// single instance's own result and error.
func (f *fleetFlags) fleetMode(set map[string]bool, jobs []job) bool {
	return len(jobs) != 1 || jobs[0].tenantsQuery != "" || jobs[0].inst.Tenant != nil ||
		set["parallel"] || set["shard"]
}

// selectModels makes the jobs of the config's models that names selects,
// all of them when names is empty: one per model, one per listed tenant
// of a model with tenants, and one template per model with a
// tenants_query.
func selectModels(cfg *config.File, names []string) ([]job, error) {
	for _, n := range names {
		if !slices.ContainsFunc(cfg.Models, func(m config.Model) bool { return m.Name == n }) {
			return nil, usageErr("config has no model named %q", n)
		}
	}
	var jobs []job
	for _, m := range cfg.Models {
		if len(names) > 0 && !slices.Contains(names, m.Name) {
			continue
		}
		o, err := optionsFromConfig(cfg, m)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		first := len(jobs)
		switch {
		case m.TenantsQuery != "":
			// Checked as if for the empty tenant until the query names
			// the real ones.
			o.Source.Tenant = new(string)
			jobs = append(jobs, job{inst: fleet.Instance{Model: m.Name}, opts: o, tenantsQuery: m.TenantsQuery})
		case m.Tenants != nil:
			for _, t := range m.Tenants {
				jobs = append(jobs, tenantJob(o, t))
			}
		default:
			jobs = append(jobs, job{inst: fleet.Instance{Model: m.Name}, opts: o})
		}
		for i := first; i < len(jobs); i++ {
			jobs[i].tableFormat = cfg.Defaults.Merge(m.Tuning).TableFormat
		}
	}
	return jobs, nil
}

func tenantJob(tmpl export.Options, tenant string) job {
	o := tmpl
	o.Source.Tenant = &tenant
	return job{inst: fleet.Instance{Model: o.Model, Tenant: &tenant}, opts: o}
}

// checkFanOut refuses a model that fans out into a destination without a
// {tenant} placeholder: its tenants would share one state, which the
// identity check refuses on the second tenant.
func checkFanOut(jobs []job, destURL string) error {
	if strings.Contains(destURL, "{tenant}") {
		return nil
	}
	for _, j := range jobs {
		if j.tenantsQuery != "" || j.inst.Tenant != nil {
			return usageErr("model %s has a tenant list, so the destination needs a {tenant} placeholder (such as s3://bucket/lake/{tenant})", j.inst.Model)
		}
	}
	return nil
}

// selectTenants keeps the jobs whose tenant --tenant names. A listed
// tenant that matches nothing is a usage error, once every tenant list is
// known (strict: a query's tenants count only after it ran).
func selectTenants(jobs []job, tenants []string, strict bool) ([]job, error) {
	if len(tenants) == 0 {
		return jobs, nil
	}
	var out []job
	matched := map[string]bool{}
	for _, j := range jobs {
		if j.tenantsQuery != "" {
			out = append(out, j)
			continue
		}
		if t := j.opts.Source.Tenant; t != nil && slices.Contains(tenants, *t) {
			matched[*t] = true
			out = append(out, j)
		}
	}
	if strict {
		for _, t := range tenants {
			if !matched[t] {
				return nil, usageErr("--tenant %q is not a tenant of the selected models", t)
			}
		}
	}
	return out, nil
}

// resolveTenants runs the tenants_query of every template, on src, and
// puts one job per tenant in its place. A tenant that the query no longer
// returns is left alone: its lake stays as it was.
func resolveTenants(ctx context.Context, env *environment, src *pgsource.Source, jobs []job) ([]job, error) {
	var out []job
	for _, j := range jobs {
		if j.tenantsQuery == "" {
			out = append(out, j)
			continue
		}
		tenants, nulls, err := src.Tenants(ctx, j.tenantsQuery)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", j.inst.Model, err)
		}
		if nulls > 0 {
			env.logger.Warn("tenants_query returned NULL, which names no tenant", "model", j.inst.Model, "rows", nulls)
		}
		env.logger.Debug("tenants_query", "model", j.inst.Model, "tenants", len(tenants))
		for _, t := range tenants {
			tj := tenantJob(j.opts, t)
			tj.tableFormat = j.tableFormat
			out = append(out, tj)
		}
	}
	return out, nil
}

// sourcePool keeps one source connection per slot of the runner,
// connected when the slot first needs it: N slots never hold more than N
// connections. A slot whose instance failed reconnects, so that a broken
// session fails no other instance.
type sourcePool struct {
	url   string
	mu    sync.Mutex
	slots []*pgsource.Source
}

func newSourcePool(url string, n int, first *pgsource.Source) *sourcePool {
	p := &sourcePool{url: url, slots: make([]*pgsource.Source, n)}
	p.slots[0] = first
	return p
}

func (p *sourcePool) get(ctx context.Context, slot int) (*pgsource.Source, error) {
	p.mu.Lock()
	s := p.slots[slot]
	p.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := pgsource.Connect(ctx, p.url)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.slots[slot] = s
	p.mu.Unlock()
	return s, nil
}

func (p *sourcePool) drop(ctx context.Context, slot int) {
	p.mu.Lock()
	s := p.slots[slot]
	p.slots[slot] = nil
	p.mu.Unlock()
	if s != nil {
		s.Close(context.WithoutCancel(ctx))
	}
}

func (p *sourcePool) close(ctx context.Context) {
	for i := range p.slots {
		p.drop(ctx, i)
	}
}

// fanOut is what the instances of one run share: the pool of source
// connections, a slot each, and the lock that keeps their output whole.
type fanOut struct {
	pool  *sourcePool
	outMu sync.Mutex
}

// open takes slot's source connection and opens j's destination, which
// the caller closes.
func (f *fanOut) open(ctx context.Context, slot int, destURL string, j job) (*pgsource.Source, *destination.Destination, error) {
	src, err := f.pool.get(ctx, slot)
	if err != nil {
		return nil, nil, err
	}
	d, err := destination.OpenTenant(ctx, destURL, j.opts.Source.Tenant)
	if err != nil {
		return nil, nil, err
	}
	return src, d, nil
}

// logger is l with the tenant of j's instance, if it has one.
func (j job) logger(l *slog.Logger) *slog.Logger {
	if j.inst.Tenant == nil {
		return l
	}
	return l.With("tenant", *j.inst.Tenant)
}

// showProgress is env.showProgress for instance j of a fan-out: the
// terminal has room for one progress line, so only when the instances run
// one at a time.
func (ff *fleetFlags) showProgress(env *environment, j job, kind progressKind) (*progress.Counter, func()) {
	if ff.parallel != 1 {
		return nil, func() {}
	}
	return env.showProgress(j.inst.String(), kind)
}

// runInstances is the fan-out of export and reconcile: it connects the
// source, resolves the tenant lists, takes the instances of the shard and
// runs do on each, ff.parallel at a time. The summary counts the
// instances of the other shards.
func runInstances(ctx context.Context, env *environment, ff *fleetFlags, shard fleet.Shard, sourceURL string, jobs []job,
	do func(ctx context.Context, f *fanOut, slot, i int, j job) (string, error)) (*fleet.Summary, error) {
	src, err := pgsource.Connect(ctx, sourceURL)
	if err != nil {
		return nil, err
	}
	f := &fanOut{pool: newSourcePool(sourceURL, ff.parallel, src)}
	defer f.pool.close(ctx)
	if jobs, err = resolveTenants(ctx, env, src, jobs); err != nil {
		return nil, err
	}
	if jobs, err = selectTenants(jobs, ff.tenants, true); err != nil {
		return nil, err
	}
	mine, insts, other := shardOf(jobs, shard)
	s := fleet.Run(ctx, ff.parallel, insts, func(ctx context.Context, slot, i int) (string, error) {
		return do(ctx, f, slot, i, mine[i])
	})
	s.OtherShards = other
	return s, nil
}

// runExports connects, resolves the tenant lists, takes the instances of
// the shard and runs them. A single instance run without the fleet flags
// returns its own error, with its own exit code; otherwise every instance
// runs to its end and a summary follows. With --json each instance prints
// its object (exportJSON) as it ends, and the summary is one more.
func runExports(ctx context.Context, env *environment, ff *fleetFlags, shard fleet.Shard, summary bool,
	sourceURL, destURL, metricsFile string, dryRunOnly bool, jobs []job) error {
	advice := new(export.Advice) // a missing index is said once per model, not per tenant
	var figMu sync.Mutex
	figs := make(map[int]runFigures) // by instance; an instance skipped has none
	do := func(ctx context.Context, f *fanOut, slot, i int, j job) (string, error) {
		pool, outMu := f.pool, &f.outMu
		o := j.opts
		o.Advice = advice
		o.Logger = j.logger(o.Logger)
		src, d, err := f.open(ctx, slot, destURL, j)
		if err != nil {
			return "", err
		}
		if dryRunOnly {
			defer d.Close()
			line, err := dryRun(ctx, env, src, d, o, j.inst.String(), j.inst.Tenant, ff.json, func(print func(io.Writer) error) error {
				outMu.Lock()
				defer outMu.Unlock()
				return print(env.stdout)
			})
			if err != nil {
				pool.drop(ctx, slot)
			}
			return line, err
		}
		start := time.Now()
		var stop func()
		o.Progress, stop = ff.showProgress(env, j, countRows)
		res, err := export.Run(ctx, src, d, d.ObjectURL, o)
		stop()
		if err == nil {
			err = publishViews(ctx, env, d, o.Model, j.tableFormat, res.State)
		}
		d.Close()
		fig := runFigures{model: o.Model, tenant: j.inst.Tenant, failed: err != nil}
		if err == nil {
			fig.commit = res.Commit
			fig.duration = res.Commit.Committed.Sub(res.Plan.Created)
		}
		figMu.Lock()
		figs[i] = fig
		figMu.Unlock()
		if ff.json {
			outMu.Lock()
			werr := writeJSON(env.stdout, newExportJSON(o.Model, j.inst.Tenant, res, err))
			outMu.Unlock()
			if err == nil {
				err = werr
			}
		}
		if err != nil {
			pool.drop(ctx, slot)
			if summary {
				o.Logger.Error("export failed", "model", o.Model, "error", err.Error())
			}
			return "", err
		}
		c := res.Commit
		line := fmt.Sprintf("committed seq %d (%s), %d rows in %d files, watermark %s, %.1fs",
			c.Seq, c.Kind, c.Metrics.RowsTransferred, len(c.Added), deref(c.Watermark), time.Since(start).Seconds())
		if !ff.json {
			outMu.Lock()
			fmt.Fprintf(env.stdout, "%s: %s\n", j.inst, line)
			outMu.Unlock()
		}
		return line, nil
	}
	s, err := runInstances(ctx, env, ff, shard, sourceURL, jobs, do)
	if err != nil {
		return err
	}
	// The instances that ran, in the order of the fleet: an instance
	// skipped (interrupted) has no figures.
	var ranFigs []runFigures
	for i := range s.Outcomes {
		if f, ok := figs[i]; ok {
			ranFigs = append(ranFigs, f)
		}
	}
	var merr error
	if metricsFile != "" {
		merr = writeMetricsFile(metricsFile, "export", ranFigs)
	}
	if !summary {
		if o := s.Outcomes[0]; o.Status != fleet.Done {
			return errors.Join(o.Err, merr)
		}
		return merr
	}
	err = reportSummary(env.stdout, s, ff.json)
	if err != nil {
		// Each instance commits on its own: the line scripts read says
		// which did, so that a rerun is not mistaken for a replay.
		err = fmt.Errorf("%w; %s", err, committedNote(s))
	}
	return errors.Join(err, merr)
}

// committedNote names the instances of s that committed, the first
// maxNamed of them.
func committedNote(s *fleet.Summary) string {
	const maxNamed = 10
	var names []string
	for _, o := range s.Outcomes {
		if o.Status == fleet.Done {
			names = append(names, o.Instance.String())
		}
	}
	switch n := len(names); {
	case n == 0:
		return "none committed"
	case n > maxNamed:
		return fmt.Sprintf("%d committed: %s and %d more", n, strings.Join(names[:maxNamed], ", "), n-maxNamed)
	}
	return "committed: " + strings.Join(names, ", ")
}

// summaryErr is the error of a summary with a failed instance, nil
// without one. When every failure is a lost race, it is a lost race (exit
// 4: rerun); when every one is a reconcile's differences, differences
// (exit 3); otherwise exit 1.
func summaryErr(s *fleet.Summary) error {
	var first *fleet.Outcome
	n, raced, differ := 0, 0, 0
	for i, o := range s.Outcomes {
		if o.Status != fleet.Failed {
			continue
		}
		if n++; first == nil {
			first = &s.Outcomes[i]
		}
		if errors.Is(o.Err, export.ErrRaceLost) {
			raced++
		}
		if errors.Is(o.Err, errDifferences) {
			differ++
		}
	}
	if n == 0 {
		return nil
	}
	class := errSomeFailed
	switch n {
	case raced:
		class = export.ErrRaceLost
	case differ:
		class = errDifferences
	}
	return fmt.Errorf("%d of %d model instances failed (%w; first: %s: %s)", n, len(s.Outcomes), class, first.Instance, fleet.OneLine(first.Err.Error()))
}

// errSomeFailed is the error of a fleet run of which an instance failed:
// the summary on stdout names each with its reason.
var errSomeFailed = errors.New("see the summary on stdout")

// reportSummary prints the summary, as text or one JSON object, and
// returns an error when an instance failed.
func reportSummary(w io.Writer, s *fleet.Summary, asJSON bool) error {
	if asJSON {
		raw, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", raw)
	} else {
		fmt.Fprintf(w, "summary: %d done, %d failed, %d skipped", s.Count(fleet.Done), s.Count(fleet.Failed), s.Count(fleet.Skipped))
		if s.OtherShards > 0 {
			fmt.Fprintf(w, ", %d in other shards", s.OtherShards)
		}
		fmt.Fprintln(w)
		for _, o := range s.Outcomes {
			if o.Status != fleet.Done {
				fmt.Fprintf(w, "%s %s: %s\n", o.Status, o.Instance, fleet.OneLine(o.Err.Error()))
			}
		}
	}
	return summaryErr(s)
}

// shardOf keeps the jobs of the shard, and counts the others.
func shardOf(jobs []job, shard fleet.Shard) (mine []job, insts []fleet.Instance, other int) {
	for _, j := range jobs {
		if shard.Has(j.inst) {
			mine = append(mine, j)
			insts = append(insts, j.inst)
		}
	}
	return mine, insts, len(jobs) - len(mine)
}

// runLake runs a maintenance command's body: once for the model its flags
// name, or, with --config, for every selected model instance (at most
// --parallel at once, of --shard), each with its own lakeFlags and a
// summary at the end. after, when set, runs before the summary is printed.
func (f *fleetFlags) runLake(ctx context.Context, env *environment, lake *lakeFlags,
	body func(ctx context.Context, env *environment, lake *lakeFlags) error, after func()) error {
	shard, err := f.check()
	if err != nil {
		return err
	}
	if f.config == "" {
		if f.parallel != 1 || f.shard != "" {
			return usageErr("--parallel and --shard need --config")
		}
		return body(ctx, env, lake)
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return usageErr("%v", err)
	}
	destURL := lake.dest
	if destURL == "" {
		destURL = cfg.Dest
	}
	if destURL == "" {
		return usageErr("--dest is required (or dest: in the config)")
	}
	jobs, err := selectModels(cfg, splitList(lake.model))
	if err != nil {
		return err
	}
	hasQuery := slices.ContainsFunc(jobs, func(j job) bool { return j.tenantsQuery != "" })
	if jobs, err = selectTenants(jobs, lake.tenants, !hasQuery); err != nil {
		return err
	}
	if err := checkFanOut(jobs, destURL); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := checkDest(destURL, j.opts.Source.Tenant); err != nil {
			return err
		}
	}
	if hasQuery {
		// One connection, to read the tenant lists, closed before the work.
		sourceURL := cmp.Or(cfg.Source, env.getenv("HIGHWATER_SOURCE"))
		if sourceURL == "" {
			return usageErr("a model has a tenants_query: the config needs a source (or $HIGHWATER_SOURCE)")
		}
		src, err := pgsource.Connect(ctx, sourceURL)
		if err != nil {
			return err
		}
		jobs, err = resolveTenants(ctx, env, src, jobs)
		src.Close(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if jobs, err = selectTenants(jobs, lake.tenants, true); err != nil {
			return err
		}
	}
	mine, insts, other := shardOf(jobs, shard)
	var outMu sync.Mutex
	s := fleet.Run(ctx, f.parallel, insts, func(ctx context.Context, _, i int) (string, error) {
		j := mine[i]
		l := &lakeFlags{dest: destURL, model: j.opts.Model, fleet: true}
		if t := j.opts.Source.Tenant; t != nil {
			l.tenant, l.tenantSet = *t, true
		}
		// An instance's lines come out together, after it ends, each led
		// by the instance when it is a tenant's: the body names the model.
		var buf bytes.Buffer
		e := *env
		e.stdout = &buf
		if j.inst.Tenant != nil {
			e.logger = env.logger.With("model", j.opts.Model, "tenant", *j.inst.Tenant)
		}
		if f.parallel > 1 {
			// No progress line: several instances would draw it at once.
			e.stderr = struct{ io.Writer }{env.stderr}
		}
		err := body(ctx, &e, l)
		if buf.Len() > 0 {
			outMu.Lock()
			for line := range strings.Lines(buf.String()) {
				// A JSON line names its tenant in its own field.
				if j.inst.Tenant != nil && !f.json {
					line = j.inst.String() + " " + line
				}
				io.WriteString(env.stdout, line)
			}
			outMu.Unlock()
		}
		return "", err
	})
	s.OtherShards = other
	for _, o := range s.Outcomes {
		if o.Status == fleet.Failed && errors.Is(o.Err, errUsage) {
			return o.Err // the same flags fail every instance, before touching any
		}
	}
	if after != nil {
		after()
	}
	return reportSummary(env.stdout, s, f.json)
}

// setFlags names the flags given on the command line, which decide whether
// a flag or the config file supplies a setting.
func setFlags(fs *pflag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	return set
}
