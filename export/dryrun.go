package export

import (
	"context"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
)

// Planned is what an export would do, as DryRun found it.
type Planned struct {
	// Plan is the plan the run would follow: a new one, not written, or
	// the unfinished run's that it would resume.
	Plan    *manifest.Plan
	Resumed bool
	// FilesDone and RowsDone are what a resumed run has checkpointed.
	FilesDone int
	RowsDone  int64
	// EstimatedRows is the planner's estimate of the rows of the plan's
	// interval; nil when the source could not give one.
	EstimatedRows *int64
	Schema        *manifest.Schema
	Warnings      []string
}

// DryRun plans an export of one model as Run would, by the same rules
// (discovery, the identity check, resuming an unfinished run, the
// interval and its upper bound), and stops there: it writes nothing to
// the destination, no plan and no probe, and reads nothing of the
// source's rows but the planner's estimate of how many the interval holds.
func DryRun(ctx context.Context, src *pgsource.Source, b objstore.Bucket, objectURL func(key string) string, opts Options) (*Planned, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &runner{opts: opts, src: src, bucket: b, url: objectURL, log: manifest.NewLog(b, opts.Model),
		attempt: manifest.NewRunID(time.Now()), logger: opts.Logger.With("model", opts.Model), dryRun: true}
	res, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	p := &Planned{Plan: res.Plan, Resumed: res.Resumed, FilesDone: len(r.chain), Schema: r.schema}
	if n := len(r.chain); n > 0 {
		p.RowsDone = r.chain[n-1].Metrics.RowsTransferred
	}
	if n, err := r.estimateRows(ctx); err != nil {
		r.warnf("no estimate of the interval's rows: %v", err)
	} else {
		p.EstimatedRows = &n
	}
	p.Warnings = r.warn
	return p, nil
}

// estimateRows is the planner's estimate of the rows of the plan's
// interval (an EXPLAIN of the first page's query without its LIMIT).
func (r *runner) estimateRows(ctx context.Context) (int64, error) {
	return r.newScanner().EstimateRows(ctx, r.plan.Interval)
}
