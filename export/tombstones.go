package export

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// deletesChangedFix says what to do when a model's tombstones would come
// from elsewhere than its committed files' did.
const deletesChangedFix = "turning a soft-delete column or the delete log on or off changes which deletes the lake holds, so the files already committed would keep rows deleted since: rerun with --full-refresh to export it anew"

// deletesChanged reports whether only where tombstones come from differs
// between the committed identity and the run's.
func deletesChanged(old, id manifest.Identity) bool {
	if old.SoftDelete == id.SoftDelete && old.DeleteLog == id.DeleteLog {
		return false
	}
	old.SoftDelete, old.DeleteLog = id.SoftDelete, id.DeleteLog
	return old.Diff(id) == ""
}

// readsDeleteLog says whether this run reads the delete log: an
// incremental export does. A first run and a full refresh read every live
// row and leave nothing earlier to delete; a backfill re-reads rows only.
func (r *runner) readsDeleteLog() bool {
	p := r.plan
	return r.opts.DeleteLog && p.Kind == manifest.KindExport && p.Interval.From != nil
}

// checkDeleteLog opens the model's delete log, which must be installed
// with the model's key and tenant columns, and stops a run whose deletes
// it may have lost (pgsource.DeleteLog.Check), before anything is read.
func (r *runner) checkDeleteLog(ctx context.Context) error {
	if !r.opts.DeleteLog {
		return nil
	}
	dl, err := r.src.OpenDeleteLog(ctx, r.table, cmp.Or(r.id.TimeZone, r.src.TimeZone))
	if err != nil {
		return err
	}
	dl.PageRows = min(r.opts.PageRows, deleteLogPageRows)
	r.deleteLog = dl
	if !r.readsDeleteLog() {
		return nil
	}
	if r.since, r.sinceAt, err = r.watermarkInstant(ctx); err != nil {
		return err
	}
	return dl.Check(ctx, r.plan.Interval.From, r.since, r.sinceAt)
}

// watermarkInstant says from when the log must vouch for every delete
// (no install and no TRUNCATE since): see deleteLogSince.
func (r *runner) watermarkInstant(ctx context.Context) (*string, *time.Time, error) {
	return deleteLogSince(ctx, r.log, r.opts.Model, r.table.ModKind, r.plan.PrevWatermark, r.logger)
}

// deleteLogSince says from when the delete log must vouch for every
// delete of a run planned on the watermark wm: from the watermark of the
// commit that set it, and, for a date modified-at column, from the
// source's clock when that commit's run was planned: the watermark is that
// run's day, read again by the next run, and its midnight lies before
// whatever that run already saw (a TRUNCATE, the log's install). Other
// kinds' watermarks are their instants (nil: the watermark itself). An
// unreadable plan leaves the watermark's midnight, which is stricter.
//
// A reset is not where the lake stood: it removed no file, so the lake
// still holds what the commit before it (and before a chain of resets)
// had read, and that commit's watermark is where the log must vouch from.
// Only the horizon is checked against the replay's lower bound, since the
// replay reads the interval's deletes again.
func deleteLogSince(ctx context.Context, log *manifest.Log, model string, kind watermark.Kind, wm *string, logger *slog.Logger) (*string, *time.Time, error) {
	since := wm
	if since == nil {
		return nil, nil, nil
	}
	st, err := log.ReadState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the state of %s: %w", model, err)
	}
	c, err := log.ReadCommit(ctx, st.LastWatermarkSeq)
	if err != nil {
		return nil, nil, fmt.Errorf("read commit %d of %s: %w", st.LastWatermarkSeq, model, err)
	}
	for c.Kind == manifest.KindReset {
		prev, err := beforeReset(ctx, log, model, c.Seq)
		if err != nil || prev == nil || prev.Watermark == nil {
			logger.Info("the commit before the reset is unreadable: the delete log is checked from the reset's watermark", "seq", c.Seq)
			return since, nil, nil
		}
		c, since = prev, prev.Watermark
	}
	if kind != watermark.Date {
		return since, nil, nil
	}
	p, err := log.ReadPlan(ctx, c.RunID)
	if err != nil || p.HWVersion == 0 {
		logger.Info("the plan of the run that set the watermark is gone: the delete log is checked from the watermark's midnight", "run", c.RunID)
		return since, nil, nil
	}
	at := time.UnixMicro(p.HWVersion)
	return since, &at, nil
}

// beforeReset is the newest commit before seq that moved the watermark,
// nil if there is none.
func beforeReset(ctx context.Context, log *manifest.Log, model string, seq int64) (*manifest.Commit, error) {
	for s := seq - 1; s > 0; s-- {
		c, err := log.ReadCommit(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("read commit %d of %s: %w", s, model, err)
		}
		if manifest.MovesWatermark(c.Kind) {
			return c, nil
		}
	}
	return nil, nil
}

// tombstones writes the delete log's entries of the run's interval as
// tombstones, after the rows, in files of their own with a checkpoint
// each, so that they are committed with the rows. A tombstone holds the
// key, the tenant and the delete time as its modified-at; the other
// columns are NULL.
//
// Each file records the log position it ends at (File.DeletesLast): a
// resumed attempt continues after the newest one, and its row phase,
// restarting after the rows' last cursor, which the tombstone files carry
// as their Last, finds nothing more to read. The log is checked again
// after it is read: a prune that committed between two pages is seen,
// since it records its horizon in the transaction that deletes.
func (r *runner) tombstones(ctx context.Context, metrics manifest.Metrics, files []manifest.File) (manifest.Metrics, []manifest.File, error) {
	if !r.readsDeleteLog() {
		return metrics, files, nil
	}
	p, dl := r.plan, r.deleteLog
	var after, rowsLast *manifest.Cursor
	if n := len(files); n > 0 {
		rowsLast = files[n-1].Last
	}
	for i := len(files) - 1; i >= 0 && after == nil; i-- {
		after = files[i].DeletesLast
	}
	if after != nil {
		r.logger.Info("resuming the delete log after the last checkpoint", "deleted_at", deref(after.ModifiedAt))
	}
	failpoint := r.opts.Failpoint
	r.opts.Failpoint = func(name string) {
		failpoint(name)
		if name == "after-upload" || name == "after-checkpoint" {
			failpoint("tombstone-" + name)
		}
	}
	defer func() { r.opts.Failpoint = failpoint }()

	bt, err := r.newBatcher()
	if err != nil {
		return metrics, nil, err
	}
	w := &fileWriter{r: r, files: files, metrics: metrics}
	var pages pageCount
	read := func(ctx context.Context, out chan<- *batch) error {
		return r.readTombstones(ctx, after, rowsLast, bt, &pages, out)
	}
	if err := pipeline(ctx, w, read, bt.release); err != nil {
		return w.metrics, nil, err
	}
	metrics = w.metrics
	metrics.Pages += pages.rest(dl.Pages)
	if err := dl.Check(ctx, p.Interval.From, r.since, r.sinceAt); err != nil {
		return metrics, nil, err
	}
	r.logger.Info("delete log read", "tombstones", metrics.DeletesTransferred, "pages", dl.Pages)
	return metrics, w.files, nil
}

// readTombstones is the read stage of the tombstone phase: the log's
// entries after the position after, in batches whose First and Last are
// the rows' last cursor. It closes out once the log is read. The batches
// carry the log's pages, counted by pages.
func (r *runner) readTombstones(ctx context.Context, after, rowsLast *manifest.Cursor, bt *batcher, pages *pageCount, out chan<- *batch) error {
	dl := r.deleteLog
	seen := dl.Pages
	var b *batch
	err := dl.Scan(ctx, r.mapping.SelectExprs(r.table.Quoted()), r.plan.Interval, after, func(tb *pgsource.Tombstone) error {
		if dl.Pages != seen {
			seen = dl.Pages
			r.opts.Failpoint("after-tombstone-page")
		}
		if b == nil {
			var err error
			if b, err = bt.take(ctx); err != nil {
				return err
			}
			b.first, b.last = rowsLast, rowsLast
		}
		pages.carry(b, dl.Pages)
		if err := r.mapping.AppendBatch(b.rows, tb.Values, r.plan.HWVersion, true); err != nil {
			return fmt.Errorf("convert tombstone: %w", err)
		}
		for _, v := range tb.Values {
			b.raw += int64(len(v)) + 4
		}
		// Entries come in delete time order, which the modified-at they
		// carry keeps.
		m := watermark.Format(r.table.ModKind, tb.Mod)
		if b.minMod == nil {
			b.minMod = &m
		}
		b.maxMod = &m
		b.deletesLast = tb.Cursor
		b.metrics.DeletesTransferred++
		if b.rows.Len() < batchRows && b.raw < bt.maxBytes {
			return nil
		}
		full := b
		b = nil
		return send(ctx, out, full)
	})
	if err != nil {
		return err
	}
	if b != nil {
		if err := send(ctx, out, b); err != nil {
			return err
		}
	}
	close(out)
	return nil
}
