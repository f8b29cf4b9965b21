package export

import (
	"context"
)

// startProgress gives the progress counter what the run has done already
// (a resumed run's checkpointed files) and the planner's estimate of the
// interval's rows. The estimate costs an EXPLAIN, so only a run that
// shows progress pays it.
func (r *runner) startProgress(ctx context.Context) {
	pr := r.opts.Progress
	if pr == nil {
		return
	}
	if n := len(r.chain); n > 0 {
		pr.Add(r.chain[n-1].Metrics.RowsTransferred)
		for _, ck := range r.chain {
			pr.AddFile(ck.File.Bytes)
		}
	}
	n, err := r.estimateRows(ctx)
	if err != nil {
		r.logger.Debug("no row estimate for the progress display", "error", err.Error())
		return
	}
	pr.AddTotal(n)
}
