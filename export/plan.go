package export

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// planRun is the first stage. It learns the table, checks the run against
// the committed state, and resumes the model's unfinished run or writes
// the plan of a new one, before anything is read.
func (r *runner) planRun(ctx context.Context) (resumed bool, err error) {
	tz, err := r.discover(ctx)
	if err != nil {
		return false, err
	}
	st, err := r.log.ReadState(ctx)
	if err != nil {
		return false, fmt.Errorf("read the state of %s: %w", r.opts.Model, err)
	}
	if adopt, err := r.checkIdentity(st); err != nil {
		return false, err
	} else if adopt {
		r.logger.Info("this run's commit records the model's new identity", "was", st.Identity.Diff(r.id))
	}
	// A full refresh replaces every earlier file, so the old types no
	// longer constrain the new ones.
	if st.Schema != nil && !r.opts.FullRefresh {
		if _, err := formats.Evolve(st.Schema.Fields, r.schema.Fields); err != nil {
			return false, fmt.Errorf("schema of %s changed: %w", r.opts.Model, err)
		}
	}
	if resumed, err = r.resume(ctx, st); err != nil || resumed {
		return resumed, err
	}
	return false, r.newPlan(ctx, st, tz)
}

// discover reads the table's columns and key, maps them to Parquet, and
// sets the run's identity. It returns the time zone naive stamps are read
// in.
func (r *runner) discover(ctx context.Context) (tz string, err error) {
	t, err := r.src.Discover(ctx, r.opts.Source)
	if err != nil {
		return "", err
	}
	r.table = t
	for _, w := range t.Warnings {
		r.adviseTable(w)
	}
	if r.mapping, err = formats.NewMapping(t.Columns, r.opts.Formats); err != nil {
		return "", fmt.Errorf("map the columns of %s to Parquet: %w", r.opts.Model, err)
	}
	r.schema = manifest.NewSchema(r.mapping.Fields(), t.Columns)
	if r.codec, err = formats.NewCodec(r.opts.Compression); err != nil {
		return "", err
	}
	tz = r.opts.TimeZone
	if tz == "" {
		tz = r.src.TimeZone
	}
	r.id = manifest.Identity{
		SystemID: r.src.SystemID, Database: r.src.Database, Relation: t.Relation, RelationOID: t.RelOID, QueryHash: t.QueryHash,
		PrimaryKey: t.PrimaryKey, ModifiedAt: t.ModifiedAt, ModifiedAtKind: t.ModKind.String(), TenantColumn: t.TenantColumn, Tenant: t.Tenant,
		SoftDelete: t.SoftDelete, DeleteLog: r.opts.DeleteLog,
	}
	if t.ModKind != watermark.Timestamptz {
		r.id.TimeZone = tz
	}
	return tz, nil
}

// checkIdentity refuses a run whose identity is not the committed one, and
// reports whether its commit must adopt the run's identity as the model's.
//
// Two cases adopt. A full refresh of the same model read from another
// incarnation of the source (another cluster, the table recreated or
// restored): it rebuilds the whole baseline, so the old watermark no longer
// matters. And a state written before relation OIDs and modified-at kinds
// were recorded: its identity has none, and this run's fills them in. A
// kind changed since is still caught, by the watermark that no longer
// reads as the column's type. Refusing that instead
// would send every model to a full refresh on upgrade with nothing to show
// that its table changed; a table recreated before the upgrade goes
// unnoticed, as it did then, and every change after it is caught.
func (r *runner) checkIdentity(st *manifest.State) (adopt bool, err error) {
	if st.Identity == nil {
		return false, nil
	}
	old := *st.Identity
	d := old.Diff(r.id)
	switch {
	case old.Completes(r.id):
		return true, nil
	case d == "":
		return false, nil
	case old.SameModel(r.id) && r.opts.FullRefresh:
		return true, nil
	case deletesChanged(old, r.id):
		return false, fmt.Errorf("%w: %s holds the state of %s: %s", ErrIdentity, r.url(r.log.Key()), d, deletesChangedFix)
	case old.SameModel(r.id):
		return false, fmt.Errorf("%w: %s holds the state of %s: the source was restored into another cluster, or the table dropped and recreated or restored from a dump, so rows below the watermark would be skipped: rerun with --full-refresh to export it anew",
			ErrIdentity, r.url(r.log.Key()), d)
	}
	return false, fmt.Errorf("%w: %s holds the state of %s: choose another --model or destination",
		ErrIdentity, r.url(r.log.Key()), d)
}

// resume picks up the newest unfinished run of the same kind, if the log
// has not moved past it.
func (r *runner) resume(ctx context.Context, st *manifest.State) (bool, error) {
	kind := r.opts.kind()
	runs, err := r.log.ListRunsSince(ctx, resumableSince(st, kind))
	if err != nil {
		return false, err
	}
	for i := len(runs) - 1; i >= 0; i-- {
		id := runs[i]
		if st.Ended(id) != nil {
			continue
		}
		p, err := r.log.ReadPlan(ctx, id)
		if err != nil {
			return false, err
		}
		if p.Kind != kind || p.Identity.Diff(r.id) != "" {
			continue
		}
		if err := r.log.Live(ctx, st, p); errors.Is(err, manifest.ErrSuperseded) {
			// What killed this plan came after every older plan of its
			// kind was made too: none of them can commit any more.
			return false, nil
		} else if err != nil {
			return false, err
		}
		if kind == manifest.KindBackfill && !r.sameWindow(ctx, p) {
			continue
		}
		return r.resumeRun(ctx, p)
	}
	return false, nil
}

// resumeRun takes over the plan p and the chain of its dead attempts,
// unless they were written under another schema.
func (r *runner) resumeRun(ctx context.Context, p *manifest.Plan) (bool, error) {
	chain, err := r.log.ReadChain(ctx, p.RunID)
	if err != nil {
		return false, err
	}
	if len(chain) > 0 && chain[len(chain)-1].File.SchemaID != r.schema.ID {
		// The source's columns changed since the dead attempt: one
		// commit records one schema, so the run starts afresh.
		r.logger.Info("not resuming a run written under another schema", "run", p.RunID)
		return false, nil
	}
	if p.Kind == manifest.KindFullRefresh {
		// Plans of builds before include_beyond_to read up to their
		// to only; a full refresh replaces every earlier file, so the
		// rest of this one reads every stamp as a new plan would.
		p.Interval.IncludeBeyondTo = true
	}
	r.plan, r.chain = p, chain
	r.logger.Info("resuming run", "run", p.RunID, "files_done", len(chain), "to", p.Interval.To)
	for _, w := range p.Warnings {
		r.warnf("%s", w)
	}
	return true, nil
}

func (r *runner) sameWindow(ctx context.Context, p *manifest.Plan) bool {
	start, _, err1 := r.src.Normalize(ctx, r.table, r.opts.WindowStart)
	end, _, err2 := r.src.Normalize(ctx, r.table, r.opts.WindowEnd)
	return err1 == nil && err2 == nil && p.Interval.From != nil && *p.Interval.From == start && p.Interval.To == end
}

func (r *runner) newPlan(ctx context.Context, st *manifest.State, tz string) error {
	kind := r.opts.kind()
	bound, err := r.src.UpperBound(ctx, r.table, tz)
	if err != nil {
		return err
	}
	if bound.Replica && kind != manifest.KindBackfill && r.opts.Lookback < MinReplicaLookback {
		return fmt.Errorf("%w: the source is a hot standby, which cannot see the primary's open transactions, so a lookback of %s would lose the rows of those that commit late: use --lookback %s or more, or export from the primary",
			ErrUnsafeLookback, r.opts.Lookback, MinReplicaLookback)
	}
	p := &manifest.Plan{
		RunID: manifest.NewRunID(time.Now()), Model: r.opts.Model, Kind: kind, Identity: r.id,
		ToBound: bound.Kind, ToBoundDetail: bound.Detail,
		BaseSeq: st.Seq, Lookback: r.opts.Lookback.String(), HWVersion: bound.Now, Created: time.Now().UTC(),
	}
	if r.sameKind(st) {
		p.PrevWatermark = st.Watermark
	}
	if bound.Watermark != bound.To {
		p.Watermark = bound.Watermark
	}
	if kind == manifest.KindBackfill {
		if p.Interval, err = r.window(ctx); err != nil {
			return err
		}
		p.ToBound, p.Watermark = "window", ""
	} else {
		for _, w := range bound.Warnings {
			p.Warnings = append(p.Warnings, "upper bound: "+w)
		}
		p.FromFloor = bound.StuckSince
		if p.Interval, err = r.interval(st, tz, &bound); err != nil {
			return err
		}
		if bound.Prepared {
			if err := r.holdForPrepared(p); err != nil {
				return err
			}
		}
	}
	for _, w := range p.Warnings {
		r.warnf("%s", w)
	}
	r.plan = p
	if r.dryRun {
		return nil
	}
	if err := r.log.WritePlan(ctx, p); err != nil {
		return err
	}
	r.logger.Info("planned run", "run", p.RunID, "kind", kind, "from", deref(p.Interval.From), "to", p.Interval.To)
	return nil
}

// window is the interval of a backfill: the window of the options, in the
// column's type.
func (r *runner) window(ctx context.Context) (manifest.Interval, error) {
	start, startMod, err := r.src.Normalize(ctx, r.table, r.opts.WindowStart)
	if err != nil {
		return manifest.Interval{}, fmt.Errorf("backfill window start: %w", err)
	}
	end, endMod, err := r.src.Normalize(ctx, r.table, r.opts.WindowEnd)
	if err != nil {
		return manifest.Interval{}, fmt.Errorf("backfill window end: %w", err)
	}
	if endMod <= startMod {
		return manifest.Interval{}, fmt.Errorf("backfill window [%s, %s) is empty", start, end)
	}
	return manifest.Interval{From: &start, To: end}, nil
}

// interval is what a run that moves the watermark reads: everything up to
// the bound for a full refresh or a first run, and from the committed
// watermark less the lookback otherwise.
func (r *runner) interval(st *manifest.State, tz string, bound *pgsource.Bound) (manifest.Interval, error) {
	switch {
	case r.opts.kind() == manifest.KindFullRefresh:
		// It replaces every earlier file, so it reads every row, whatever
		// its stamp; its watermark is still its bound.
		return manifest.Interval{To: bound.To, IncludeNull: true, IncludeBeyondTo: true}, nil
	case st.Watermark == nil:
		return manifest.Interval{To: bound.To, IncludeNull: true}, nil
	}
	t := r.table
	wm, err := watermark.Parse(t.ModKind, *st.Watermark)
	if err != nil {
		return manifest.Interval{}, fmt.Errorf("read the committed watermark %q: %w", *st.Watermark, err)
	}
	from := wm.Sub(t.ModKind, r.opts.Lookback)
	if st.FromFloor != nil {
		// The floor holds from below a transaction still open at the
		// last run: ignoring an unreadable one would skip its rows.
		floor, err := watermark.Parse(t.ModKind, *st.FromFloor)
		if err != nil {
			return manifest.Interval{}, fmt.Errorf("read the committed watermark %q: %w", *st.FromFloor, err)
		}
		from = min(from, floor)
	}
	if t.ModKind == watermark.Timestamp {
		from = r.widenForFallBack(tz, from, time.UnixMicro(bound.Now))
	}
	if t.ModKind == watermark.Date && bound.WatermarkMod < from {
		// The bound's day can still receive rows, whatever an older
		// version (whose date watermark was the end of the day) or a
		// clock stepped back committed.
		from = bound.WatermarkMod
	}
	f := watermark.Format(t.ModKind, from)
	if bound.WatermarkMod < wm {
		r.warnf("the source clock (%s) is behind the committed watermark (%s): the watermark stays", bound.Watermark, *st.Watermark)
	}
	return manifest.Interval{From: &f, To: bound.To}, nil
}

// holdForPrepared lowers the plan's from floor to its from while a
// prepared transaction is open. A prepared transaction stamped its rows
// at its start, before its PREPARE, which is all the bound sees of it. It
// was not prepared yet when the run before the first that saw it was
// planned, so that run's bound was at or below its start: from stays at
// or below this run's from until no prepared transaction is left.
func (r *runner) holdForPrepared(p *manifest.Plan) error {
	floor := watermark.Format(r.table.ModKind, watermark.NegInfinity)
	if p.Interval.From != nil {
		floor = *p.Interval.From
	}
	lower := p.FromFloor == nil
	if !lower {
		var err error
		if lower, err = r.below(floor, *p.FromFloor); err != nil {
			return err
		}
	}
	if lower {
		p.FromFloor = &floor
	}
	return nil
}

// widenForFallBack lowers a naive from when the zone's clocks fell back
// between from and now (see watermark.WidenForFallBack).
func (r *runner) widenForFallBack(tz string, from watermark.Value, now time.Time) watermark.Value {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		r.warnf("time zone %q is unknown to highwater, so a daylight-saving fall-back is not widened for: %v", tz, err)
		return from
	}
	return watermark.WidenForFallBack(from, loc, now)
}

// below reports whether the literal a lies before b.
func (r *runner) below(a, b string) (bool, error) {
	am, err := watermark.Parse(r.table.ModKind, a)
	if err != nil {
		return false, fmt.Errorf("read the floor %q: %w", a, err)
	}
	bm, err := watermark.Parse(r.table.ModKind, b)
	if err != nil {
		return false, fmt.Errorf("read the committed floor %q: %w", b, err)
	}
	return am < bm, nil
}

// sameKind reports whether the committed watermark is a literal of this
// run's modified-at type. It is not after the column changed type, which
// only a full refresh may follow (see checkIdentity): the old watermark
// orders nothing of the new type. A kind that cannot be told is taken as
// the same, and the watermark's parse says whether it is.
func (r *runner) sameKind(st *manifest.State) bool {
	old, err := st.ModifiedAtKind()
	return err != nil || old == r.table.ModKind
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}
