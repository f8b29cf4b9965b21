package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
)

// extract is the second stage: it reads the plan's interval after the
// chain's last checkpoint and writes the remaining files, each followed
// by its checkpoint. It runs two goroutines under one errgroup: read
// (rows cut into batches by a batcher) and write (batches into files).
// The first error cancels the other, and a file being uploaded is
// aborted rather than finished.
func (r *runner) extract(ctx context.Context) (manifest.Metrics, []manifest.File, error) {
	w := &fileWriter{r: r}
	var start *manifest.Cursor
	for _, ck := range r.chain {
		w.files = append(w.files, ck.File)
		w.metrics = ck.Metrics
		start = ck.File.Last
	}
	bt, err := r.newBatcher()
	if err != nil {
		return w.metrics, nil, err
	}
	sc := r.newScanner()
	sc.PageSize = pgsource.PagesOf(r.opts.PageRows)
	sc.Warn = func(msg string) { r.warnf("%s", msg) }
	sc.AfterPage = func() { r.opts.Failpoint("after-page") }

	var pages pageCount
	read := func(ctx context.Context, out chan<- *batch) error { return r.read(ctx, sc, start, bt, &pages, out) }
	if err := pipeline(ctx, w, read, bt.release); err != nil {
		return w.metrics, nil, err
	}
	metrics := w.metrics
	metrics.Pages += pages.rest(sc.Pages)
	if p := r.plan; p.Kind != manifest.KindFullRefresh && p.Kind != manifest.KindBackfill {
		if err := r.countUnseen(ctx, sc, &metrics); err != nil {
			return metrics, nil, err
		}
	}
	return metrics, w.files, nil
}

// pipeline runs a read stage, which sends batches to out and closes it
// once its read is complete, and the write stage w under one errgroup:
// the first error cancels the other stage.
func pipeline(ctx context.Context, w *fileWriter, read func(context.Context, chan<- *batch) error, release func(*batch)) error {
	batches := make(chan *batch, batchesQueued)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return read(gctx, batches) })
	// The write stage runs on this goroutine, where the failpoints of its
	// uploads and checkpoints stop the run where it stands, as a killed
	// process would (a test makes them panic). Its result joins the group
	// through written, so that its error cancels the read as the read's
	// cancels it.
	written := make(chan error, 1)
	g.Go(func() error { return <-written })
	// The reader shares the source connection with whoever runs next, so
	// it must have stopped before extract returns, whatever way it
	// returns.
	defer func() {
		select {
		case written <- errWriteStopped:
		default:
		}
		g.Wait()
	}()
	written <- w.run(gctx, batches, release)
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// errWriteStopped ends the read when the write stage stopped without a
// result: a panic on its way up.
var errWriteStopped = errors.New("the write stage stopped")

func (r *runner) newScanner() *pgsource.Scanner {
	return r.src.NewScanner(r.table, r.mapping.SelectExprs(r.table.Quoted()))
}

// read scans the interval after start and hands the rows to the write
// stage in batches. It closes out only once the scan is complete, so that
// the write stage never takes a read cut short for its end. The batches
// carry the scanner's pages, counted by pages.
func (r *runner) read(ctx context.Context, sc *pgsource.Scanner, start *manifest.Cursor, bt *batcher, pages *pageCount, out chan<- *batch) error {
	err := sc.Scan(ctx, r.plan.Interval, start, func(row *pgsource.Row) error {
		b, err := bt.add(ctx, row, row.Deleted)
		if err != nil {
			return err
		}
		if b == nil {
			pages.carry(bt.b, sc.Pages)
			return nil
		}
		pages.carry(b, sc.Pages)
		return send(ctx, out, b)
	})
	if err != nil {
		return err
	}
	if bt.pending() {
		last, err := sc.LastCursor()
		if err != nil {
			return err
		}
		if err := send(ctx, out, bt.cut(last)); err != nil {
			return err
		}
	}
	close(out)
	return nil
}

func send(ctx context.Context, out chan<- *batch, b *batch) error {
	select {
	case out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fileWriter is the write stage: it writes the batches into files rolled
// at the target size, each followed by its checkpoint.
type fileWriter struct {
	r *runner
	// files and metrics are the run's so far, the chain's included;
	// metrics counts a file once it is checkpointed.
	files   []manifest.File
	metrics manifest.Metrics
	part    *partWriter // open, or nil
	// partMetrics counts the batches written to part.
	partMetrics manifest.Metrics
}

// run writes the batches until the read stage closes them, and then ends
// the last file. It aborts an open file when it returns early: on an
// error of its own, or once ctx is cancelled by the read stage's.
func (w *fileWriter) run(ctx context.Context, batches <-chan *batch, release func(*batch)) error {
	defer w.abort()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case b, ok := <-batches:
			if !ok {
				return w.finish(ctx)
			}
			if err := w.write(ctx, b, release); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// write adds b to the open file, opening one if none is, and ends the
// file once it reaches the target size.
func (w *fileWriter) write(ctx context.Context, b *batch, release func(*batch)) error {
	r := w.r
	if w.part == nil {
		key := manifest.DataKey(r.plan.RunID, r.attempt, len(w.files)+1)
		var err error
		if w.part, err = openPart(ctx, r.bucket, r.log, key, r.mapping, r.codec, &r.opts, r.fileMetadata()); err != nil {
			return err
		}
	}
	if err := w.part.write(b); err != nil {
		return err
	}
	w.partMetrics.Add(b.metrics)
	r.opts.Progress.Add(b.metrics.RowsTransferred)
	release(b)
	if w.part.fw.EstimatedSize() >= r.opts.TargetFileBytes {
		return w.closePart(ctx)
	}
	return nil
}

// finish ends the last file once every batch is written.
func (w *fileWriter) finish(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.part == nil {
		return nil
	}
	return w.closePart(ctx)
}

// abort stops the upload of an open file; the store keeps nothing of it.
func (w *fileWriter) abort() {
	if w.part != nil {
		w.part.abort()
		w.part = nil
	}
}

// closePart ends the open file, waits until the store holds it, and
// writes its checkpoint.
func (w *fileWriter) closePart(ctx context.Context) error {
	r := w.r
	f, err := w.part.close(w.part.file.Last)
	w.part = nil
	if err != nil {
		return err
	}
	f.SchemaID = r.schema.ID
	r.opts.Failpoint("after-upload")
	w.partMetrics.Files, w.partMetrics.Bytes = 1, f.Bytes
	w.metrics.Add(w.partMetrics)
	w.partMetrics = manifest.Metrics{}
	ck := &manifest.FileCheckpoint{RunID: r.plan.RunID, AttemptID: r.attempt, N: len(w.files) + 1, File: f, Metrics: w.metrics}
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
	w.files = append(w.files, f)
	r.logger.Info("file written", "key", f.Key, "rows", f.Rows, "bytes", f.Bytes)
	return nil
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
