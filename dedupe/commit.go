package dedupe

import (
	"context"
	"errors"
	"fmt"

	"github.com/highwater-dev/highwater/manifest"
)

// errStartOver: the log moved so that this round's rewrite may be stale.
var errStartOver = errors.New("the dedupe's inputs changed; starting over")

// commit is the last stage: it appends the dedupe to the log. It rebases
// over commits that only added files, as long as every input is still
// committed; anything that removed files (manifest.Kills) means the
// rewrite may be stale, and it starts over.
func (r *runner) commit(ctx context.Context, w *work, p *manifest.Plan, added []manifest.File, inputs []manifest.File, res *Result) (*manifest.Commit, bool, error) {
	builds := 0
	c, _, err := r.log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		if builds++; builds > 1 {
			r.logger.Info("another writer committed first; re-reading the log", "run", p.RunID)
		}
		return r.build(ctx, st, w, p, added, inputs, res)
	})
	if err == errStartOver {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	r.logger.Info("dedupe committed", "seq", c.Seq, "removed", len(inputs), "added", len(added), "rows", res.OutputRows)
	return c, false, nil
}

// build makes the dedupe's commit on top of the state st, or returns
// errStartOver when st no longer holds what the round rewrote.
func (r *runner) build(ctx context.Context, st *manifest.State, w *work, p *manifest.Plan, added, inputs []manifest.File, res *Result) (*manifest.Commit, error) {
	err := r.log.Live(ctx, st, p)
	switch {
	case errors.Is(err, manifest.ErrSuperseded):
		r.logger.Info("a commit removed files since the dedupe began; starting over", "why", err)
		return nil, errStartOver
	case err != nil:
		return nil, fmt.Errorf("dedupe %s: %w; run the dedupe again", r.opts.Model, err)
	}
	res.Rebased = st.Seq > w.base.Seq
	live := st.FileSet()
	removed := make([]string, len(inputs))
	for i, f := range inputs {
		if _, ok := live[f.Key]; !ok {
			return nil, errStartOver
		}
		removed[i] = f.Key
	}
	return &manifest.Commit{
		Kind: manifest.KindDedupe, RunID: p.RunID, Identity: *st.Identity,
		Watermark: st.Watermark, FromFloor: st.FromFloor, Added: added, Removed: removed,
		Metrics: &manifest.Metrics{RowsTransferred: res.InputRows, Files: int64(len(added)), Bytes: res.OutputBytes},
		Layout:  w.layout.encode(), Warnings: res.Warnings,
	}, nil
}
