package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// Result describes a committed run.
type Result struct {
	Commit   *manifest.Commit
	Plan     *manifest.Plan
	Resumed  bool
	Warnings []string
}

type runner struct {
	opts    Options
	src     *pgsource.Source
	dest    *destination.Destination
	log     *manifest.Log
	table   *pgsource.Table
	mapping *formats.Mapping
	codec   compress.Codec // shared by the run's files: it holds zstd's history
	schema  *manifest.Schema
	id      manifest.Identity
	plan    *manifest.Plan
	chain   []manifest.FileCheckpoint
	attempt string
	logger  *slog.Logger

	deleteLog *pgsource.DeleteLog // the model's, with DeleteLog set
	sinceAt   *time.Time          // see watermarkInstant

	warnMu sync.Mutex // the reader goroutine warns too
	warn   []string
}

// Run exports one model. It resumes the model's unfinished run when there
// is one, and otherwise plans a new one.
func Run(ctx context.Context, src *pgsource.Source, dest *destination.Destination, opts Options) (*Result, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &runner{opts: opts, src: src, dest: dest, log: manifest.NewLog(dest, opts.Model),
		attempt: manifest.NewRunID(time.Now()), logger: opts.Logger.With("model", opts.Model)}
	r.log.Failpoint = opts.Failpoint
	return r.run(ctx)
}

func (r *runner) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.warnMu.Lock()
	r.warn = append(r.warn, msg)
	r.warnMu.Unlock()
	r.logger.Warn(msg)
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	t, err := r.src.Discover(ctx, r.opts.Source)
	if err != nil {
		return nil, err
	}
	r.table = t
	for _, w := range t.Warnings {
		r.warnf("%s", w)
	}
	if r.mapping, err = formats.NewMapping(t.Columns, r.opts.Formats); err != nil {
		return nil, fmt.Errorf("map the columns of %s to Parquet: %w", r.opts.Model, err)
	}
	r.schema = manifest.NewSchema(r.mapping.Fields(), t.Columns)
	if r.codec, err = formats.NewCodec(r.opts.Compression); err != nil {
		return nil, err
	}
	tz := r.opts.TimeZone
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
	st, err := r.log.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the state of %s: %w", r.opts.Model, err)
	}
	if adopt, err := r.checkIdentity(st); err != nil {
		return nil, err
	} else if adopt {
		r.logger.Info("this run's commit records the model's new identity", "was", st.Identity.Diff(r.id))
	}
	// A full refresh replaces every earlier file, so the old types no
	// longer constrain the new ones.
	if st.Schema != nil && !r.opts.FullRefresh {
		if _, err := formats.Evolve(st.Schema.Fields, r.schema.Fields); err != nil {
			return nil, fmt.Errorf("schema of %s changed: %w", r.opts.Model, err)
		}
	}
	resumed, err := r.resume(ctx, st)
	if err != nil {
		return nil, err
	}
	if !resumed {
		if err := r.newPlan(ctx, st, tz); err != nil {
			return nil, err
		}
	}
	r.opts.Failpoint("after-plan")
	if err := r.checkDeleteLog(ctx); err != nil {
		return nil, err
	}
	r.startProgress(ctx)
	metrics, files, err := r.extract(ctx)
	if err != nil {
		return nil, err
	}
	if metrics, files, err = r.tombstones(ctx, metrics, files); err != nil {
		return nil, err
	}
	c, st, err := r.commit(ctx, metrics, files)
	if err != nil {
		return nil, err
	}
	r.opts.Failpoint("after-commit")
	r.opts.Failpoint("before-symlink")
	if err := r.log.WriteSymlinkManifestFrom(ctx, st, r.dest.ObjectURL); err != nil {
		// The commit stands; the next commit rewrites the list.
		r.warnf("rewrite the symlink manifest: %v", err)
	}
	return &Result{Commit: c, Plan: r.plan, Resumed: resumed, Warnings: r.warn}, nil
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
		return false, fmt.Errorf("%w: %s/%s holds the state of %s: %s", ErrIdentity, r.dest, r.opts.Model, d, deletesChangedFix)
	case old.SameModel(r.id):
		return false, fmt.Errorf("%w: %s/%s holds the state of %s: the source was restored into another cluster, or the table dropped and recreated or restored from a dump, so rows below the watermark would be skipped: rerun with --full-refresh to export it anew",
			ErrIdentity, r.dest, r.opts.Model, d)
	}
	return false, fmt.Errorf("%w: %s/%s holds the state of %s: choose another --model or destination",
		ErrIdentity, r.dest, r.opts.Model, d)
}

// resume picks up the newest unfinished run of the same kind, if the log
// has not moved past it.
func (r *runner) resume(ctx context.Context, st *manifest.State) (bool, error) {
	runs, err := r.log.ListRuns(ctx)
	if err != nil {
		return false, err
	}
	kind := r.opts.kind()
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
		chain, err := r.log.ReadChain(ctx, id)
		if err != nil {
			return false, err
		}
		if len(chain) > 0 && chain[len(chain)-1].File.SchemaID != r.schema.ID {
			// The source's columns changed since the dead attempt: one
			// commit records one schema, so the run starts afresh.
			r.logger.Info("not resuming a run written under another schema", "run", id)
			return false, nil
		}
		if p.Kind == manifest.KindFullRefresh {
			// Plans of builds before include_beyond_to read up to their
			// to only; a full refresh replaces every earlier file, so the
			// rest of this one reads every stamp as a new plan would.
			p.Interval.IncludeBeyondTo = true
		}
		r.plan, r.chain = p, chain
		r.logger.Info("resuming run", "run", id, "files_done", len(chain), "to", p.Interval.To)
		for _, w := range p.Warnings {
			r.warnf("%s", w)
		}
		return true, nil
	}
	return false, nil
}

func (r *runner) sameWindow(ctx context.Context, p *manifest.Plan) bool {
	start, _, err1 := r.src.Normalize(ctx, r.table, r.opts.WindowStart)
	end, _, err2 := r.src.Normalize(ctx, r.table, r.opts.WindowEnd)
	return err1 == nil && err2 == nil && p.Interval.From != nil && *p.Interval.From == start && p.Interval.To == end
}

func (r *runner) newPlan(ctx context.Context, st *manifest.State, tz string) error {
	kind := r.opts.kind()
	t := r.table
	bound, err := r.src.UpperBound(ctx, t, tz)
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
	if kind != manifest.KindBackfill {
		for _, w := range bound.Warnings {
			p.Warnings = append(p.Warnings, "upper bound: "+w)
		}
		p.FromFloor = bound.StuckSince
	}
	switch {
	case kind == manifest.KindBackfill:
		start, startMod, err := r.src.Normalize(ctx, t, r.opts.WindowStart)
		if err != nil {
			return fmt.Errorf("backfill window start: %w", err)
		}
		end, endMod, err := r.src.Normalize(ctx, t, r.opts.WindowEnd)
		if err != nil {
			return fmt.Errorf("backfill window end: %w", err)
		}
		if endMod <= startMod {
			return fmt.Errorf("backfill window [%s, %s) is empty", start, end)
		}
		p.Interval = manifest.Interval{From: &start, To: end}
		p.ToBound, p.Watermark = "window", ""
	case kind == manifest.KindFullRefresh:
		// It replaces every earlier file, so it reads every row, whatever
		// its stamp; its watermark is still its bound.
		p.Interval = manifest.Interval{To: bound.To, IncludeNull: true, IncludeBeyondTo: true}
	case st.Watermark == nil:
		p.Interval = manifest.Interval{To: bound.To, IncludeNull: true}
	default:
		wm, err := watermark.Parse(t.ModKind, *st.Watermark)
		if err != nil {
			return fmt.Errorf("read the committed watermark %q: %w", *st.Watermark, err)
		}
		from := wm.Sub(t.ModKind, r.opts.Lookback)
		if st.FromFloor != nil {
			// The floor holds from below a transaction still open at the
			// last run: ignoring an unreadable one would skip its rows.
			floor, err := watermark.Parse(t.ModKind, *st.FromFloor)
			if err != nil {
				return fmt.Errorf("read the committed watermark %q: %w", *st.FromFloor, err)
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
		p.Interval = manifest.Interval{From: &f, To: bound.To}
		if bound.WatermarkMod < wm {
			r.warnf("the source clock (%s) is behind the committed watermark (%s): the watermark stays", bound.Watermark, *st.Watermark)
		}
	}
	if bound.Prepared && kind != manifest.KindBackfill {
		// A prepared transaction stamped its rows at its start, before its
		// PREPARE, which is all the bound sees of it. It was not prepared
		// yet when the run before the first that saw it was planned, so
		// that run's bound was at or below its start: from stays at or below
		// this run's from until no prepared transaction is left.
		floor := watermark.Format(t.ModKind, watermark.NegInfinity)
		if p.Interval.From != nil {
			floor = *p.Interval.From
		}
		lower := p.FromFloor == nil
		if !lower {
			if lower, err = r.below(floor, *p.FromFloor); err != nil {
				return err
			}
		}
		if lower {
			p.FromFloor = &floor
		}
	}
	for _, w := range p.Warnings {
		r.warnf("%s", w)
	}
	if err := r.log.WritePlan(ctx, p); err != nil {
		return err
	}
	r.plan = p
	r.logger.Info("planned run", "run", p.RunID, "kind", kind, "from", deref(p.Interval.From), "to", p.Interval.To)
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

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// extract reads the plan's interval after the chain's last checkpoint and
// writes the remaining files, each followed by its checkpoint.
func (r *runner) extract(ctx context.Context) (manifest.Metrics, []manifest.File, error) {
	var metrics manifest.Metrics
	var files []manifest.File
	var start *manifest.Cursor
	for _, ck := range r.chain {
		files = append(files, ck.File)
		metrics = ck.Metrics
		start = ck.File.Last
	}
	p := r.plan
	t := r.table
	// The bounds the rows are counted against.
	parse := func(lit *string) (*watermark.Value, error) {
		if lit == nil {
			return nil, nil
		}
		v, err := watermark.Parse(t.ModKind, *lit)
		if err != nil {
			return nil, fmt.Errorf("read the committed watermark %q: %w", *lit, err)
		}
		return &v, nil
	}
	var prevWM, from, toMod *watermark.Value
	var err error
	if p.Interval.IncludeBeyondTo {
		// The rows beyond to are read, and counted as they pass.
		if toMod, err = parse(&p.Interval.To); err != nil {
			return metrics, nil, err
		}
	}
	if p.Kind != manifest.KindBackfill {
		if prevWM, err = parse(p.PrevWatermark); err != nil {
			return metrics, nil, err
		}
	}
	if from, err = parse(p.Interval.From); err != nil {
		return metrics, nil, err
	}
	sc := r.src.NewScanner(t, r.mapping.SelectExprs(t.Quoted()))
	sc.PageRows = r.opts.PageRows
	sc.Warn = func(msg string) { r.warnf("%s", msg) }
	sc.AfterPage = func() { r.opts.Failpoint("after-page") }

	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan *batch, 4)
	free := make(chan *batch, 6)
	for range cap(free) {
		free <- &batch{}
	}
	const batchRows = 1024
	batchBytes := max(r.opts.RowGroupBytes/8, 1<<20)
	warnedWide := false
	readErr := make(chan error, 1)
	readDone := make(chan struct{})
	// The reader shares the source connection with whoever runs next, so it
	// must have stopped before extract returns, whatever way it returns.
	defer func() {
		cancel()
		for range batches {
		}
		<-readDone
	}()
	go func() {
		defer close(readDone)
		defer close(batches)
		var b *batch
		take := func() *batch {
			select {
			case nb := <-free:
				nb.rows, nb.raw, nb.first, nb.last, nb.minMod, nb.maxMod = nb.rows[:0], 0, nil, nil, nil, nil
				nb.metrics = manifest.Metrics{}
				return nb
			case <-ctx.Done():
				return nil
			}
		}
		var lastMod watermark.Value
		var lastNull bool
		send := func(row *pgsource.Row) error {
			last, err := row.Cursor()
			if err != nil {
				return err
			}
			b.last = last
			if !lastNull {
				m := watermark.Format(t.ModKind, lastMod)
				b.maxMod = &m
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			b = nil
			return nil
		}
		err := sc.Scan(ctx, p.Interval, start,
			func(row *pgsource.Row) error {
				if b == nil {
					if b = take(); b == nil {
						return ctx.Err()
					}
					c, err := row.Cursor()
					if err != nil {
						return err
					}
					b.first = c
				}
				var pr parquet.Row
				if n := len(b.rows); n < cap(b.rows) {
					pr = b.rows[:n+1][n]
				}
				pr, err := r.mapping.AppendRow(pr, row.Values, p.HWVersion, row.Deleted)
				if err != nil {
					return fmt.Errorf("convert row: %w", err)
				}
				b.rows = append(b.rows, pr)
				var raw int64
				for _, v := range row.Values {
					raw += int64(len(v)) + 4
				}
				b.raw += raw
				if raw > r.opts.RowGroupBytes && !warnedWide {
					warnedWide = true
					r.warnf("a row of %s is larger than the row-group size of %s: a row is never split, so the export holds several copies of it in memory at once", humanize.IBytes(uint64(raw)), humanize.IBytes(uint64(r.opts.RowGroupBytes)))
				}
				m := &b.metrics
				m.RowsTransferred++
				if row.Deleted {
					m.DeletesTransferred++
				}
				if row.ModNull {
					m.RowsNullModifiedAt++
				} else {
					if b.minMod == nil {
						s := watermark.Format(t.ModKind, row.Mod)
						b.minMod = &s
					}
					if toMod != nil && row.Mod >= *toMod {
						m.RowsBeyondTo++
					}
					if prevWM == nil || row.Mod >= *prevWM {
						m.DeltaRowsTransferred++
					} else if from == nil || row.Mod >= *from {
						m.RowsInLookback++
					}
				}
				lastMod, lastNull = row.Mod, row.ModNull
				// A batch is bounded by bytes as well as rows, so that wide
				// rows do not hold a thousand of themselves in flight.
				if len(b.rows) == batchRows || b.raw >= batchBytes {
					return send(row)
				}
				return nil
			})
		if err == nil && b != nil && len(b.rows) > 0 {
			if b.last, err = sc.LastCursor(); err == nil {
				if !lastNull {
					m := watermark.Format(t.ModKind, lastMod)
					b.maxMod = &m
				}
				select {
				case batches <- b:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
		}
		readErr <- err
	}()

	files, metrics, err = r.writeFiles(ctx, batches, free, readErr, files, metrics)
	if err != nil {
		return metrics, nil, err
	}
	metrics.Pages += sc.Pages
	if p.Kind != manifest.KindFullRefresh && p.Kind != manifest.KindBackfill {
		if err := r.countUnseen(ctx, sc, &metrics); err != nil {
			return metrics, nil, err
		}
	}
	return metrics, files, nil
}

// countUnseen counts the rows an incremental run cannot read, and says
// truly why each kind is unseen and what will take it.
func (r *runner) countUnseen(ctx context.Context, sc *pgsource.Scanner, metrics *manifest.Metrics) error {
	p, t := r.plan, r.table
	tz := cmp.Or(r.id.TimeZone, r.src.TimeZone)
	counts, err := sc.CountUnseen(ctx, p.Interval.To, tz)
	if err != nil {
		return err
	}
	metrics.RowsBeyondTo = counts.BeyondTo
	if !p.Interval.IncludeNull {
		metrics.RowsNullModifiedAt = counts.NullModifiedAt
		if counts.NullModifiedAt > 0 {
			r.warnf("%d rows have a NULL %q and are not exported by incremental runs: a --full-refresh takes them", counts.NullModifiedAt, t.ModifiedAt)
		}
	}
	if counts.Infinity > 0 {
		r.warnf("%d rows are stamped 'infinity' in %q: no incremental run ever reaches them; a --full-refresh takes them", counts.Infinity, t.ModifiedAt)
	}
	if counts.Future > 0 {
		r.warnf("%d rows are stamped in the future, after the source's clock (an application clock ahead of the database's, or a stamp set ahead on purpose): incremental runs export them once the clock passes them; a --full-refresh takes them now", counts.Future)
	}
	recent := counts.BeyondTo - counts.Infinity - counts.Future
	switch {
	case recent <= 0:
	case p.ToBound == "oldest_transaction" || p.ToBound == "prepared_transaction" || p.ToBound == "replay":
		r.warnf("%d rows are stamped at or after this run's upper bound %s, which %s held back: the next run takes them", recent, p.Interval.To, p.ToBoundDetail)
	default:
		r.logger.Info("rows stamped since the run's upper bound are left to the next run", "rows", recent, "to", p.Interval.To)
	}
	return nil
}

// writeFiles writes the batches into files rolled at the target size,
// each followed by its checkpoint.
func (r *runner) writeFiles(ctx context.Context, batches <-chan *batch, free chan<- *batch, readErr <-chan error, files []manifest.File, metrics manifest.Metrics) ([]manifest.File, manifest.Metrics, error) {
	var part *partWriter
	var partMetrics manifest.Metrics
	closePart := func() error {
		f, err := part.close(part.file.Last)
		part = nil
		if err != nil {
			return err
		}
		f.SchemaID = r.schema.ID
		r.opts.Failpoint("after-upload")
		partMetrics.Files, partMetrics.Bytes = 1, f.Bytes
		metrics.Add(partMetrics)
		partMetrics = manifest.Metrics{}
		ck := &manifest.FileCheckpoint{RunID: r.plan.RunID, AttemptID: r.attempt, N: len(files) + 1, File: f, Metrics: metrics}
		if err := r.log.WriteFileCheckpoint(ctx, ck); err != nil {
			if errors.Is(err, manifest.ErrChainTaken) {
				// A twin process took this run over: to a script that is
				// the same as losing the race to another export.
				return fmt.Errorf("%w: %w", ErrRaceLost, err)
			}
			return err
		}
		r.opts.Failpoint("after-checkpoint")
		r.opts.Progress.AddFile(f.Bytes)
		files = append(files, f)
		r.logger.Info("file written", "key", f.Key, "rows", f.Rows, "bytes", f.Bytes)
		return nil
	}
	for b := range batches {
		if part == nil {
			key := manifest.DataKey(r.plan.RunID, r.attempt, len(files)+1)
			var err error
			if part, err = openPart(ctx, r.dest, r.log, key, r.mapping, r.codec, &r.opts, r.fileMetadata()); err != nil {
				return files, metrics, err
			}
		}
		if err := part.write(b); err != nil {
			part.abort()
			return files, metrics, err
		}
		partMetrics.Add(b.metrics)
		r.opts.Progress.Add(b.metrics.RowsTransferred)
		free <- b
		if part.fw.EstimatedSize() >= r.opts.TargetFileBytes {
			if err := closePart(); err != nil {
				return files, metrics, err
			}
		}
	}
	// The reader has closed batches: its error, if any, is there. A failed
	// read leaves the open file unfinished rather than checkpointed.
	if err := <-readErr; err != nil || ctx.Err() != nil {
		if part != nil {
			part.abort()
		}
		return files, metrics, cmp.Or(err, ctx.Err())
	}
	if part != nil {
		if err := closePart(); err != nil {
			return files, metrics, err
		}
	}
	return files, metrics, nil
}

func (r *runner) fileMetadata() map[string]string {
	p := r.plan
	return map[string]string{
		manifest.MetaModel:         r.opts.Model,
		manifest.MetaRunID:         p.RunID,
		manifest.MetaAttemptID:     r.attempt,
		manifest.MetaKind:          p.Kind,
		manifest.MetaIntervalFrom:  deref(p.Interval.From),
		manifest.MetaIntervalTo:    p.Interval.To,
		manifest.MetaSchemaID:      r.schema.ID,
		manifest.MetaFormatVersion: fmt.Sprint(manifest.FormatVersion),
	}
}

// commit appends the run to the log. It rebases over commits that leave
// its plan live (manifest.Kills), and gives up when one killed it.
func (r *runner) commit(ctx context.Context, metrics manifest.Metrics, files []manifest.File) (*manifest.Commit, *manifest.State, error) {
	p := r.plan
	r.opts.Failpoint("before-commit")
	builds := 0
	c, st, err := r.log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		if builds++; builds > 1 {
			r.logger.Info("another writer committed first; re-reading the log", "run", p.RunID)
		}
		adopt, err := r.checkIdentity(st)
		if err != nil {
			return nil, err
		}
		if err := r.log.Live(ctx, st, p); err != nil {
			return nil, deadRun(err)
		}
		c := &manifest.Commit{
			Kind: p.Kind, RunID: p.RunID, Identity: r.id, AdoptsIdentity: adopt, Interval: &p.Interval, ToBound: p.ToBound, ToBoundDetail: p.ToBoundDetail,
			Watermark: st.Watermark, FromFloor: st.FromFloor, Added: files, Schema: r.schema, Metrics: &metrics,
			Warnings: r.warn,
		}
		if manifest.MovesWatermark(p.Kind) {
			if c.Watermark, err = r.advance(st, cmp.Or(p.Watermark, p.Interval.To)); err != nil {
				return nil, err
			}
			// This run's observation: nil clears the floor once the stuck
			// transaction has ended.
			c.FromFloor = p.FromFloor
		}
		if p.Kind == manifest.KindFullRefresh {
			for _, f := range st.Files {
				c.Removed = append(c.Removed, f.Key)
			}
		}
		return c, nil
	})
	if err != nil {
		return nil, nil, err
	}
	r.logger.Info("committed", "seq", c.Seq, "watermark", deref(c.Watermark), "files", len(files), "rows", metrics.RowsTransferred)
	return c, st, nil
}

// deadRun says what a script does about a plan the log made dead: a run
// that another export or attempt overtook lost the race (exit 4, rerun);
// one that a vacuum declared abandoned is run again.
func deadRun(err error) error {
	switch {
	case errors.Is(err, manifest.ErrSuperseded):
		return fmt.Errorf("%w: %w; its plan is abandoned, run the export again", ErrRaceLost, err)
	case errors.Is(err, manifest.ErrCommitted):
		return fmt.Errorf("%w: %w by another attempt", ErrRaceLost, err)
	case errors.Is(err, manifest.ErrAbandoned):
		return fmt.Errorf("%w; run the export again", err)
	}
	return err
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

// advance returns the watermark after a run to to: never backwards. It
// refuses a watermark it cannot read rather than guess which way is
// forward.
func (r *runner) advance(st *manifest.State, to string) (*string, error) {
	prev := st.Watermark
	if prev == nil || !r.sameKind(st) {
		return &to, nil
	}
	kind := r.table.ModKind
	pm, err := watermark.Parse(kind, *prev)
	if err != nil {
		return nil, fmt.Errorf("read the committed watermark %q: %w", *prev, err)
	}
	tm, err := watermark.Parse(kind, to)
	if err != nil {
		return nil, fmt.Errorf("read the planned watermark %q: %w", to, err)
	}
	if tm < pm {
		return prev, nil
	}
	return &to, nil
}
