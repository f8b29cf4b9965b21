package export

import (
	"context"
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// Bounds of a batch. A batch is bounded by bytes as well as rows, so that
// wide rows do not hold a thousand of themselves in flight.
const (
	batchRows = 1024
	// batchesInFlight is how many batches exist: those queued for the
	// write stage, the one it writes and the one being filled.
	batchesInFlight = 6
	batchesQueued   = 4
)

// batcher cuts the rows of the scan into batches for the write stage and
// counts each row against the plan's bounds, for the metrics a commit
// carries (delta, lookback, beyond to, NULL modified-at). Its batches come
// from a fixed set that the write stage hands back, so that their rows'
// buffers are reused and memory is bounded whatever the table's size.
//
// Rows come in scan order, (modified_at, pk) ascending, from whatever
// reads them; add takes a row of any source of them.
type batcher struct {
	kind    watermark.Kind
	mapping *formats.Mapping
	version int64 // every row's _hw_version
	// The bounds the rows are counted against; nil where the plan has
	// none.
	prevWM, from, toMod *watermark.Value
	maxBytes            int64 // of a batch
	rowGroupBytes       int64 // a row wider than this is warned about
	warnf               func(format string, args ...any)

	free       chan *batch
	b          *batch // being filled, or nil
	lastMod    watermark.Value
	lastNull   bool
	warnedWide bool
}

func (r *runner) newBatcher() (*batcher, error) {
	p, kind := r.plan, r.table.ModKind
	bt := &batcher{kind: kind, mapping: r.mapping, version: p.HWVersion,
		maxBytes: max(r.opts.RowGroupBytes/8, 1<<20), rowGroupBytes: r.opts.RowGroupBytes, warnf: r.warnf,
		free: make(chan *batch, batchesInFlight)}
	for range cap(bt.free) {
		bt.free <- &batch{rows: r.mapping.NewBatch()}
	}
	var err error
	if p.Interval.IncludeBeyondTo {
		// The rows beyond to are read, and counted as they pass.
		if bt.toMod, err = parseBound(kind, &p.Interval.To); err != nil {
			return nil, err
		}
	}
	if p.Kind != manifest.KindBackfill {
		if bt.prevWM, err = parseBound(kind, p.PrevWatermark); err != nil {
			return nil, err
		}
	}
	if bt.from, err = parseBound(kind, p.Interval.From); err != nil {
		return nil, err
	}
	return bt, nil
}

func parseBound(kind watermark.Kind, lit *string) (*watermark.Value, error) {
	if lit == nil {
		return nil, nil
	}
	v, err := watermark.Parse(kind, *lit)
	if err != nil {
		return nil, fmt.Errorf("read the committed watermark %q: %w", *lit, err)
	}
	return &v, nil
}

// add appends a row, a tombstone when deleted, to the batch being filled,
// and returns that batch once it is full. It waits for a free batch, or
// for ctx to end.
func (bt *batcher) add(ctx context.Context, row *pgsource.Row, deleted bool) (*batch, error) {
	if bt.b == nil {
		if err := bt.start(ctx, row); err != nil {
			return nil, err
		}
	}
	b := bt.b
	if err := bt.mapping.AppendBatch(b.rows, row.Values, bt.version, deleted); err != nil {
		return nil, fmt.Errorf("convert row: %w", err)
	}
	bt.measure(row)
	bt.count(row, deleted)
	bt.lastMod, bt.lastNull = row.Mod, row.ModNull
	if b.rows.Len() < batchRows && b.raw < bt.maxBytes {
		return nil, nil
	}
	last, err := row.Cursor()
	if err != nil {
		return nil, err
	}
	return bt.cut(last), nil
}

// start takes a free batch for the rows from row on.
func (bt *batcher) start(ctx context.Context, row *pgsource.Row) error {
	b, err := bt.take(ctx)
	if err != nil {
		return err
	}
	bt.b = b
	b.first, err = row.Cursor()
	return err
}

// take waits for a free batch, or for ctx to end, and empties it.
func (bt *batcher) take(ctx context.Context) (*batch, error) {
	select {
	case b := <-bt.free:
		b.rows.Reset()
		b.raw, b.first, b.last, b.minMod, b.maxMod, b.deletesLast = 0, nil, nil, nil, nil, nil
		b.metrics = manifest.Metrics{}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// measure adds the row's wire size to the batch's, and warns once of a
// row wider than a row group.
func (bt *batcher) measure(row *pgsource.Row) {
	var raw int64
	for _, v := range row.Values {
		raw += int64(len(v)) + 4
	}
	bt.b.raw += raw
	if raw > bt.rowGroupBytes && !bt.warnedWide {
		bt.warnedWide = true
		bt.warnf("a row of %s is larger than the row-group size of %s: a row is never split, so the export holds several copies of it in memory at once", humanize.IBytes(uint64(raw)), humanize.IBytes(uint64(bt.rowGroupBytes)))
	}
}

// count counts the row in the batch's metrics.
func (bt *batcher) count(row *pgsource.Row, deleted bool) {
	b := bt.b
	m := &b.metrics
	m.RowsTransferred++
	if deleted {
		m.DeletesTransferred++
	}
	if row.ModNull {
		m.RowsNullModifiedAt++
		return
	}
	if b.minMod == nil {
		s := watermark.Format(bt.kind, row.Mod)
		b.minMod = &s
	}
	if bt.toMod != nil && row.Mod >= *bt.toMod {
		m.RowsBeyondTo++
	}
	if bt.prevWM == nil || row.Mod >= *bt.prevWM {
		m.DeltaRowsTransferred++
	} else if bt.from == nil || row.Mod >= *bt.from {
		m.RowsInLookback++
	}
}

// pending reports whether a batch holds rows not yet handed over.
func (bt *batcher) pending() bool { return bt.b != nil && bt.b.rows.Len() > 0 }

// cut ends the batch being filled at the cursor last and hands it over.
func (bt *batcher) cut(last *manifest.Cursor) *batch {
	b := bt.b
	b.last = last
	if !bt.lastNull {
		m := watermark.Format(bt.kind, bt.lastMod)
		b.maxMod = &m
	}
	bt.b = nil
	return b
}

// release gives a batch the write stage is done with back for reuse.
func (bt *batcher) release(b *batch) { bt.free <- b }
