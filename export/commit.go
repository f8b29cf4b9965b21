package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// commit is the last stage: it appends the run to the log. It rebases over
// commits that leave its plan live (manifest.Kills), and gives up when one
// killed it.
func (r *runner) commit(ctx context.Context, metrics manifest.Metrics, files []manifest.File) (*manifest.Commit, *manifest.State, error) {
	p := r.plan
	r.opts.Failpoint("before-commit")
	builds := 0
	c, st, err := r.log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		if builds++; builds > 1 {
			r.logger.Info("another writer committed first; re-reading the log", "run", p.RunID)
		}
		return r.build(ctx, st, metrics, files)
	})
	if err != nil {
		return nil, nil, err
	}
	r.logger.Info("committed", "seq", c.Seq, "watermark", deref(c.Watermark), "files", len(files), "rows", metrics.RowsTransferred)
	return c, st, nil
}

// build makes the run's commit on top of the state st.
func (r *runner) build(ctx context.Context, st *manifest.State, metrics manifest.Metrics, files []manifest.File) (*manifest.Commit, error) {
	p := r.plan
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
