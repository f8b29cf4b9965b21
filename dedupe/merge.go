package dedupe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// merger is the second stage: it sorts and merges the touched buckets'
// spill files and writes each bucket's winners in key order. Buckets are
// independent: several are merged at once (lanes), one per core, each with
// its share of the memory budget. Row groups are encoded apart from the
// merge, by as many encoders as workers shared by all buckets: with fewer
// buckets than workers (a first dedupe of under a target file is one
// bucket), each bucket keeps several row groups in the encoders at once,
// and its sort sorts in parallel.
type merger struct {
	r      *runner
	w      *work
	p      *partitioner
	runID  string
	todo   []int // the touched buckets, in bucket order
	lanes  int
	window int // row groups of one bucket in the encoders at once
	codecs *codecs
	schema *parquet.Schema // of the outputs, nil without inputs
	// schemaID is the inputs' schema: read once before the lanes start,
	// since the lanes' bucket files join the inputs as they are opened.
	schemaID string
	// rowGroup is the raw bytes of one output row group; maxGroups rolls a
	// file at that many row groups.
	rowGroup  int64
	maxGroups int
	gate      *gate
	attempt   string
	seq       atomic.Int64 // numbers the files of all lanes
	next      atomic.Int64 // the next bucket of todo to claim
	dropped   atomic.Int64
	runs      atomic.Int64
	spilled   atomic.Int64
}

func (r *runner) newMerger(ctx context.Context, w *work, p *partitioner, runID string) (*merger, error) {
	m := &merger{r: r, w: w, p: p, runID: runID, attempt: manifest.NewID()[:12]}
	for b := range w.layout.Buckets {
		if p.parts.rows[b] > 0 {
			m.todo = append(m.todo, b)
		}
	}
	workers := r.workers()
	compression, err := r.compression(ctx, w.base)
	if err != nil {
		return nil, err
	}
	m.lanes = max(1, min(workers, len(m.todo)))
	m.window = max(1, workers/m.lanes)
	if m.codecs, err = newCodecs(workers, func() (compress.Codec, error) { return formats.NewCodec(compression) }); err != nil {
		return nil, err
	}
	if p.schema != nil {
		m.schema = parquet.NewSchema(p.schema.Name(), withCodec(p.schema, m.codecs))
	}
	if len(p.stats.inputs) > 0 {
		m.schemaID = p.stats.inputs[0].SchemaID
	}
	// The row group share holds the raw bytes of, per bucket, the row
	// group being filled and those in the encoders; these hold as much
	// again in encoded pages (rowGroupCharge). The gate takes what the
	// encoders hold, whatever the buckets' progress.
	p.stats.rowGroupsHeld = m.lanes * (m.window + 1)
	m.rowGroup = max(1, r.budget.rowGroupBytes/int64(p.stats.rowGroupsHeld))
	m.gate = newGate(int64(m.lanes*m.window) * rowGroupCharge(m.rowGroup))
	// Each bucket being rewritten has one file open, whose row groups'
	// metadata grows until its footer.
	m.maxGroups = 1 << 30
	if p.schema != nil {
		m.maxGroups = int(max(1, r.budget.metaBytes/int64(m.lanes)/int64(len(p.schema.Columns())*groupMetaBytes)))
	}
	return m, nil
}

// merge runs the lanes under one errgroup: the first error cancels the
// others, whose uploads in flight are aborted rather than finished only to
// be deleted. It returns the outputs of every bucket in bucket order.
func (m *merger) merge(ctx context.Context) (*outputs, error) {
	enc := startEncoders(m.r.workers())
	g, gctx := errgroup.WithContext(ctx)
	outs := make([]*outputs, m.lanes)
	for i := range outs {
		out := m.newOutputs(gctx, enc)
		outs[i] = out
		g.Go(func() error { return m.lane(gctx, out) })
	}
	err := g.Wait()
	enc.stop()
	all := &outputs{}
	stats := m.p.stats
	for _, o := range outs {
		all.files = append(all.files, o.files...)
		all.bytesOut += o.bytesOut
		all.rowsOut += o.rowsOut
		stats.inFlight = max(stats.inFlight, o.inFlight)
	}
	if err != nil {
		m.r.discard(all.files)
		return nil, err
	}
	// Commit the files in bucket order, as one worker would have.
	slices.SortStableFunc(all.files, func(a, b manifest.File) int { return cmp.Compare(*a.Bucket, *b.Bucket) })
	stats.dropped = m.dropped.Load()
	stats.sortRuns += int(m.runs.Load())
	stats.spilled += m.spilled.Load()
	return all, nil
}

// newOutputs makes a lane's writer, whose uploads end with ctx.
func (m *merger) newOutputs(ctx context.Context, enc *encoders) *outputs {
	r := m.r
	o := &outputs{ctx: ctx, progress: r.opts.Progress, bucket: r.bucket, log: r.log, runID: m.runID, attempt: m.attempt, seq: &m.seq, build: r.opts.Build,
		target: r.opts.TargetFileBytes, rowGroup: m.rowGroup, modKind: m.w.modKind, codec: m.codecs, schema: m.schema,
		enc: enc, window: m.window, gate: m.gate, maxGroups: m.maxGroups,
		kv: map[string]string{manifest.MetaModel: r.opts.Model, manifest.MetaRunID: m.runID, manifest.MetaKind: manifest.KindDedupe,
			manifest.MetaFormatVersion: fmt.Sprint(manifest.FormatVersion)}}
	o.schemaID = m.schemaID
	return o
}

// lane merges buckets one at a time into out until none is left.
func (m *merger) lane(ctx context.Context, out *outputs) error {
	srt := &sorter{dir: m.p.dir, budget: m.r.budget.sortBytes / int64(m.lanes), par: m.window}
	defer func() { m.runs.Add(int64(srt.runsWritten)); m.spilled.Add(srt.spilled) }()
	for ctx.Err() == nil {
		i := int(m.next.Add(1)) - 1
		if i >= len(m.todo) {
			return nil
		}
		b := m.todo[i]
		// The bucket's files are one sorted run already.
		run := m.p.bucketRun(ctx, b)
		emit := func(rec []byte) error { return m.emit(out, b, rec) }
		var err error
		if m.p.sorted != nil {
			// The partition stage sorted the runs: merge the bucket's
			// segments.
			err = srt.mergeRuns(m.p.sorted.segments(b), []recSource{run}, emit)
		} else {
			err = srt.run(m.p.parts.files[b], m.p.parts.bytes[b], []recSource{run}, emit)
		}
		run.close()
		if err == nil {
			err = out.endBucket()
		}
		if err != nil {
			out.abort()
			return err
		}
		// The bucket's spill file is done with: free its disk now.
		m.p.parts.drop(b)
	}
	return ctx.Err()
}

// emit writes one winner of bucket b, unless it is a tombstone past the
// floor.
func (m *merger) emit(out *outputs, b int, rec []byte) error {
	if recFlags(rec)&flagDeleted != 0 && m.w.floor != nil && (recFlags(rec)&flagModNull != 0 || recMod(rec) < *m.w.floor) {
		m.dropped.Add(1)
		return nil
	}
	return out.add(b, rec)
}
