package dedupe

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// maxRounds bounds how often a dedupe starts over because another dedupe
// or a full refresh committed meanwhile.
const maxRounds = 5

// workers is how many files or buckets a run processes at once.
func (r *runner) workers() int { return r.budget.workers }

// Result describes a dedupe.
type Result struct {
	// Commit is nil when there was nothing to do; Reason says why.
	Commit *manifest.Commit
	Reason string
	Layout Layout
	// FullRewrite: every committed file was an input (first dedupe, or a
	// new layout).
	FullRewrite    bool
	BucketsTouched int
	InputFiles     int
	InputBytes     int64
	InputRows      int64
	OutputFiles    int
	OutputBytes    int64
	OutputRows     int64
	// TombstonesDropped counts winning tombstones past the lookback.
	TombstonesDropped int64
	// SortRuns counts sort runs spilled to disk (0: everything fitted).
	SortRuns int
	// RecordBytes is the size of the new rows encoded as records; for
	// SpilledBytes, the bytes of records written to the temporary
	// directory (spill files by bucket, sort runs and their merges).
	RecordBytes  int64
	SpilledBytes int64
	// Presorted: the partition stage sorted the runs (few buckets), so
	// that the records crossed the disk once.
	Presorted bool
	// RowGroupsAtOnce is the most row groups of one bucket that were handed
	// to the encoders at once: above 1, one bucket used several cores.
	RowGroupsAtOnce int
	// LeastMemoryLimit is the least MemoryLimit this process can keep:
	// the binary's resident pages, the slack and the least Go heap. Under
	// it the run went on and logged a warning.
	LeastMemoryLimit int64
	// Rounds counts the attempts, >1 when it had to start over.
	Rounds   int
	Rebased  bool
	Warnings []string
}

type runner struct {
	opts   Options
	bucket objstore.Bucket
	url    func(key string) string
	log    *manifest.Log
	logger *slog.Logger
	budget budget
}

// Run dedupes one model of the lake rooted at b: it rewrites the committed
// set, or the buckets that new files touch, into one row per primary key,
// and commits the result in one commit that removes every input.
// objectURL turns a key of b into the URL by which engines read it, for
// the symlink manifest.
func Run(ctx context.Context, b objstore.Bucket, objectURL func(key string) string, opts Options) (*Result, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// The limit is a promise about the process's RSS: make the collector
	// keep Go's memory under what the binary's resident pages leave.
	files, ok := fileResident()
	if !ok {
		files = fileReserve
	}
	r := &runner{opts: opts, bucket: b, url: objectURL, log: manifest.NewLog(b, opts.Model),
		logger: opts.Logger.With("model", opts.Model), budget: newBudget(opts.MemoryLimit, files, heapInUse(), runtime.GOMAXPROCS(0))}
	res := &Result{LeastMemoryLimit: feasible(files)}
	if res.LeastMemoryLimit > opts.MemoryLimit {
		r.logger.Warn("the memory limit is too small for this process; it will be exceeded",
			"limit", opts.MemoryLimit, "least", res.LeastMemoryLimit, "binary_resident", files, "go_minimum", minGoLimit)
	}
	prev := debug.SetMemoryLimit(r.budget.goLimit)
	defer debug.SetMemoryLimit(prev)
	r.logger.Debug("memory budget", "limit", opts.MemoryLimit, "binary_resident", files, "go_limit", r.budget.goLimit,
		"workers", r.budget.workers, "sort", r.budget.sortBytes, "row_groups", r.budget.rowGroupBytes,
		"row_group_metadata", r.budget.metaBytes, "spill_buffers", r.budget.spillBuffers)
	for round := 1; round <= maxRounds; round++ {
		res.Rounds = round
		again, err := r.round(ctx, res)
		if err != nil || !again {
			return res, err
		}
	}
	return res, fmt.Errorf("dedupe %s: other writers removed files %d times while it ran; run it again later", opts.Model, maxRounds)
}

// round goes once through the stages in order: plan (what to rewrite,
// written down before anything is read), partition and merge (rewrite:
// the rows into spill files by bucket, each bucket's winners into files)
// and commit (the files into the log). again means another dedupe or a
// full refresh committed meanwhile and the caller must start over.
func (r *runner) round(ctx context.Context, res *Result) (again bool, err error) {
	st, err := r.log.ReadState(ctx)
	if err != nil {
		return false, fmt.Errorf("read the state of %s: %w", r.opts.Model, err)
	}
	w, reason, err := r.plan(ctx, st)
	if err != nil || w == nil {
		res.Reason = reason
		return false, err
	}
	p := &manifest.Plan{RunID: manifest.NewRunID(time.Now()), Model: r.opts.Model, Kind: manifest.KindDedupe,
		Identity: *st.Identity, PrevWatermark: st.Watermark, BaseSeq: st.Seq, Created: time.Now().UTC()}
	if err := r.log.WritePlan(ctx, p); err != nil {
		return false, err
	}
	r.logger.Info("dedupe planned", "run", p.RunID, "base_seq", st.Seq, "buckets", w.layout.Buckets, "full", w.full, "fresh_files", len(w.fresh))
	out, stats, err := r.rewrite(ctx, w, p.RunID)
	if err != nil {
		return false, err
	}
	*res = Result{Layout: w.layout, FullRewrite: w.full, Rounds: res.Rounds, LeastMemoryLimit: res.LeastMemoryLimit}
	res.BucketsTouched, res.InputFiles, res.InputBytes, res.InputRows = stats.touched, len(stats.inputs), stats.inputBytes, stats.inputRows
	res.OutputFiles, res.OutputBytes, res.OutputRows = len(out.files), out.bytesOut, out.rowsOut
	res.TombstonesDropped, res.SortRuns, res.RowGroupsAtOnce = stats.dropped, stats.sortRuns, stats.inFlight
	res.RecordBytes, res.SpilledBytes, res.Presorted = stats.recordBytes, stats.spilled, stats.presorted
	// The row-group budget is split among the row groups held at once
	// (being filled and in the encoders), fewer bytes each than a
	// worker's share of the sort budget: that is the share a row must fit.
	if msg := r.budget.tooWide(stats.widest, stats.rowGroupsHeld); msg != "" {
		r.logger.Warn(msg)
		res.Warnings = append(res.Warnings, msg)
	}

	r.opts.Failpoint("dedupe-before-commit")
	c, again, err := r.commit(ctx, w, p, out.files, stats.inputs, res)
	if again {
		// The log moved on without this round: nothing references its
		// outputs, so they go now rather than wait for a vacuum.
		r.discard(out.files)
	}
	if err != nil || again {
		// After an error the commit may still have landed (its answer
		// lost): the outputs stay, and a vacuum deletes them only if the
		// log never names them.
		return again, err
	}
	res.Commit = c
	r.opts.Failpoint("dedupe-after-commit")
	if err := r.log.WriteSymlinkManifest(ctx, r.url); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("rewrite the symlink manifest: %v", err))
	}
	return false, nil
}

func (r *runner) discard(files []manifest.File) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range files {
		_ = r.bucket.Delete(ctx, r.log.Key(f.Key))
	}
}

type rewriteStats struct {
	inputs      []manifest.File
	inputBytes  int64
	inputRows   int64
	touched     int
	dropped     int64
	sortRuns    int
	recordBytes int64 // of the fresh files' rows
	spilled     int64 // bytes written to the spill directory
	presorted   bool
	inFlight    int
	widest      int64 // the largest row, encoded
	// rowGroupsHeld is how many output row groups may be in memory at
	// once, over which the row-group budget is split.
	rowGroupsHeld int
}

// rewrite runs the stages between the plan and the commit: partition
// (the fresh files' rows into one spill file per bucket) and merge (each
// touched bucket's spilled rows and existing files, which are sorted
// already, into its winners in key order, into its files).
func (r *runner) rewrite(ctx context.Context, w *work, runID string) (*outputs, *rewriteStats, error) {
	dir, err := newSpillDir(r.opts.TempDir)
	if err != nil {
		return nil, nil, err
	}
	defer dir.remove()
	parts := newPartitions(dir, w.layout.Buckets, r.budget.spillBuffers)
	defer parts.close()
	p := &partitioner{r: r, w: w, dir: dir, parts: parts, stats: &rewriteStats{}}
	if !r.opts.noPresort && presorts(w.layout.Buckets, r.budget.sortBytes/int64(r.workers())) {
		p.sorted = &presorted{}
		defer p.sorted.close()
	}
	p.stats.presorted = p.sorted != nil
	if err := p.partition(ctx); err != nil {
		return nil, nil, err
	}
	m, err := r.newMerger(ctx, w, p, runID)
	if err != nil {
		return nil, nil, err
	}
	out, err := m.merge(ctx)
	if err != nil {
		return nil, nil, err
	}
	p.sortInputs()
	return out, p.stats, nil
}
