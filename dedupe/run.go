package dedupe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/parquet-go/parquet-go"
)

// maxRounds bounds how often a dedupe starts over because another dedupe
// or a full refresh committed meanwhile.
const maxRounds = 5

// maxWorkers bounds the files decoded and the buckets rewritten at once.
const maxWorkers = 4

// workerHeap is the Go memory one more worker needs to be worth it: each
// holds an input file's pages, a zstd encoder, a row group and a share of
// the sort budget. Under a tight limit more workers only make the
// collector run without end (a 64 MiB limit took 70% more CPU with two).
const workerHeap = 32 << 20

// workers is how many files or buckets a run processes at once.
func (r *runner) workers() int {
	return max(1, min(runtime.GOMAXPROCS(0), maxWorkers, int(r.budget.goLimit/workerHeap)))
}

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
		logger: opts.Logger.With("model", opts.Model), budget: newBudget(opts.MemoryLimit, files, heapInUse())}
	if r.budget.goLimit+files+slack > opts.MemoryLimit {
		r.logger.Warn("the memory limit is too small for this process; it will be exceeded",
			"limit", opts.MemoryLimit, "binary_resident", files, "go_minimum", minGoLimit)
	}
	prev := debug.SetMemoryLimit(r.budget.goLimit)
	defer debug.SetMemoryLimit(prev)
	r.logger.Debug("memory budget", "limit", opts.MemoryLimit, "binary_resident", files, "go_limit", r.budget.goLimit,
		"sort", r.budget.sortBytes, "row_group", r.budget.rowGroupBytes, "spill_buffers", r.budget.spillBuffers)
	res := &Result{}
	for round := 1; round <= maxRounds; round++ {
		res.Rounds = round
		again, err := r.round(ctx, res)
		if err != nil || !again {
			return res, err
		}
	}
	return res, fmt.Errorf("dedupe %s: other writers removed files %d times while it ran; run it again later", opts.Model, maxRounds)
}

// work is what one round rewrites.
type work struct {
	base   *manifest.State
	layout Layout
	full   bool
	// fresh are the unbucketed files (all files on a full rewrite), in
	// committed order; bucketed are the bucket files by bucket.
	fresh    []manifest.File
	bucketed map[int][]manifest.File
	order    map[string]int // committed position of every file
	floor    *int64         // tombstones older than this are dropped
	modKind  watermark.Kind
}

func (r *runner) plan(ctx context.Context, st *manifest.State, res *Result) (*work, string, error) {
	if st.Seq == 0 || st.Identity == nil {
		return nil, "", fmt.Errorf("dedupe %s: %w", r.opts.Model, ErrNoState)
	}
	if len(st.Files) == 0 {
		return nil, "the committed set is empty", nil
	}
	w := &work{base: st, bucketed: map[int][]manifest.File{}, order: map[string]int{}}
	var total int64
	for i, f := range st.Files {
		w.order[f.Key] = i
		total += f.Bytes
	}
	layout, ok, err := committedLayout(st)
	if err != nil {
		return nil, "", err
	}
	if ok {
		for _, f := range st.Files {
			if f.Bucket != nil && *f.Bucket >= layout.Buckets {
				ok = false // files of another layout: start afresh
			}
		}
	}
	if ok && int64(layout.Buckets) < maxBuckets && total/int64(layout.Buckets) > relayoutFactor*r.opts.TargetFileBytes {
		r.logger.Info("buckets outgrew the target file size; rewriting into a new layout", "buckets", layout.Buckets, "bytes", total)
		ok = false
	}
	if !ok {
		n := r.opts.Buckets
		if n == 0 {
			n = chooseBuckets(total, r.opts.TargetFileBytes, r.workers())
		}
		w.layout, w.full, w.fresh = Layout{Scheme: layoutScheme, Hash: layoutHash, Buckets: n}, true, st.Files
	} else {
		w.layout = layout
		for _, f := range st.Files {
			if f.Bucket == nil {
				w.fresh = append(w.fresh, f)
			} else {
				w.bucketed[*f.Bucket] = append(w.bucketed[*f.Bucket], f)
			}
		}
		if len(w.fresh) == 0 {
			return nil, fmt.Sprintf("nothing was committed since the last dedupe (seq %d): every file is in its bucket", st.Seq), nil
		}
	}
	if w.modKind, err = st.ModifiedAtKind(); err != nil {
		return nil, "", err
	}
	if !r.opts.KeepTombstones && st.Watermark != nil {
		lookback, err := r.lookback(ctx, st)
		if err != nil {
			return nil, "", err
		}
		wm, err := watermark.Parse(w.modKind, *st.Watermark)
		if err != nil {
			return nil, "", fmt.Errorf("read the committed watermark %q: %w", *st.Watermark, err)
		}
		floor := wm.Sub(w.modKind, lookback)
		// A stuck transaction can hold the next run's from below the
		// lookback: its rows could still bring older versions, so an
		// unreadable floor must not drop their tombstones.
		if st.FromFloor != nil {
			ff, err := watermark.Parse(w.modKind, *st.FromFloor)
			if err != nil {
				return nil, "", fmt.Errorf("read the committed watermark %q: %w", *st.FromFloor, err)
			}
			floor = min(floor, ff)
		}
		f := int64(floor)
		w.floor = &f
	}
	return w, "", nil
}

// lookback is the one the next export will use: the option, else the last
// export plan's, else the default.
func (r *runner) lookback(ctx context.Context, st *manifest.State) (time.Duration, error) {
	if r.opts.Lookback != nil {
		return *r.opts.Lookback, nil
	}
	for run, seq := range st.Runs {
		if seq != st.LastWatermarkSeq {
			continue
		}
		p, err := r.log.ReadPlan(ctx, run)
		if err != nil {
			return 0, fmt.Errorf("read the last export's lookback: %w", err)
		}
		d, err := time.ParseDuration(p.Lookback)
		if err != nil {
			return 0, fmt.Errorf("read the last export's lookback %q: %w", p.Lookback, err)
		}
		return d, nil
	}
	return watermark.DefaultLookback, nil
}

// round plans, rewrites and commits once. again means another dedupe or a
// full refresh committed meanwhile and the caller must start over.
func (r *runner) round(ctx context.Context, res *Result) (again bool, err error) {
	st, err := r.log.ReadState(ctx)
	if err != nil {
		return false, fmt.Errorf("read the state of %s: %w", r.opts.Model, err)
	}
	w, reason, err := r.plan(ctx, st, res)
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
	*res = Result{Layout: w.layout, FullRewrite: w.full, Rounds: res.Rounds}
	res.BucketsTouched, res.InputFiles, res.InputBytes, res.InputRows = stats.touched, len(stats.inputs), stats.inputBytes, stats.inputRows
	res.OutputFiles, res.OutputBytes, res.OutputRows = len(out.files), out.bytesOut, out.rowsOut
	res.TombstonesDropped, res.SortRuns = stats.dropped, stats.sortRuns
	if msg := r.budget.tooWide(stats.widest, r.workers()); msg != "" {
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

// errStartOver: the log moved so that this round's rewrite may be stale.
var errStartOver = errors.New("the dedupe's inputs changed; starting over")

// commit appends the dedupe to the log. It rebases over commits that only
// added files, as long as every input is still committed; anything that
// removed files (manifest.Kills) means the rewrite may be stale, and it
// starts over.
func (r *runner) commit(ctx context.Context, w *work, p *manifest.Plan, added []manifest.File, inputs []manifest.File, res *Result) (*manifest.Commit, bool, error) {
	removed := make([]string, len(inputs))
	for i, f := range inputs {
		removed[i] = f.Key
	}
	builds := 0
	c, _, err := r.log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		if builds++; builds > 1 {
			r.logger.Info("another writer committed first; re-reading the log", "run", p.RunID)
		}
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
		for _, f := range inputs {
			if _, ok := live[f.Key]; !ok {
				return nil, errStartOver
			}
		}
		return &manifest.Commit{
			Kind: manifest.KindDedupe, RunID: p.RunID, Identity: *st.Identity,
			Watermark: st.Watermark, FromFloor: st.FromFloor, Added: added, Removed: removed,
			Metrics: &manifest.Metrics{RowsTransferred: res.InputRows, Files: int64(len(added)), Bytes: res.OutputBytes},
			Layout:  w.layout.encode(), Warnings: res.Warnings,
		}, nil
	})
	if err == errStartOver {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	r.logger.Info("dedupe committed", "seq", c.Seq, "removed", len(removed), "added", len(added), "rows", res.OutputRows)
	return c, false, nil
}

type rewriteStats struct {
	inputs     []manifest.File
	inputBytes int64
	inputRows  int64
	touched    int
	dropped    int64
	sortRuns   int
	widest     int64 // the largest row, encoded
}

// rewrite partitions the fresh files' rows by bucket, adds the existing
// files of every bucket they touch, and writes each touched bucket's
// winners in key order.
func (r *runner) rewrite(ctx context.Context, w *work, runID string) (*outputs, *rewriteStats, error) {
	dir, err := newSpillDir(r.opts.TempDir)
	if err != nil {
		return nil, nil, err
	}
	defer dir.remove()
	parts := newPartitions(dir, w.layout.Buckets, r.budget.spillBuffers)
	defer parts.close()
	stats := &rewriteStats{}
	var (
		sh     *shape
		schema *parquet.Schema
	)
	// Input files are decoded on every core; mu guards what they share:
	// the schema, the stats and the spill files, which take records in
	// batches.
	var mu sync.Mutex
	const batchBytes = 256 << 10
	read := func(f manifest.File, want int, enc *encoder, batch *recBatch) error {
		in, err := openInput(ctx, r.bucket, r.log.Key(f.Key), dir)
		if err != nil {
			return err
		}
		defer in.close()
		mu.Lock()
		if schema == nil {
			schema = in.pf.Schema()
			if sh, err = newShape(schema, *w.base.Identity); err != nil {
				mu.Unlock()
				return fmt.Errorf("read %s: %w", f.Key, err)
			}
		} else if !parquet.EqualNodes(schema, in.pf.Schema()) {
			mu.Unlock()
			return fmt.Errorf("read %s: its Parquet schema differs from the other inputs' (the model's schema changed): dedupe across schema changes is not supported yet; a --full-refresh export rewrites the model in one schema", f.Key)
		}
		enc.sh = sh
		stats.inputs = append(stats.inputs, f)
		stats.inputBytes += f.Bytes
		mu.Unlock()
		flush := func() error {
			mu.Lock()
			defer mu.Unlock()
			for i, b := range batch.buckets {
				if err := parts.add(b, batch.data[batch.offs[i]:batch.offs[i+1]]); err != nil {
					return err
				}
			}
			stats.inputRows += int64(len(batch.buckets))
			r.opts.Progress.Add(int64(len(batch.buckets)))
			batch.reset()
			return nil
		}
		base := uint64(w.order[f.Key]) << 36
		var n uint64
		var widest int
		err = in.eachRow(ctx, func(row parquet.Row) error {
			var h uint64
			before := len(batch.data)
			batch.data, h = enc.encode(batch.data, row, base|n)
			widest = max(widest, len(batch.data)-before)
			n++
			b := w.layout.bucketOf(h)
			if want >= 0 && b != want {
				return fmt.Errorf("read %s: a row of bucket %d is in a file of bucket %d: the layout is broken", f.Key, b, want)
			}
			batch.buckets = append(batch.buckets, b)
			batch.offs = append(batch.offs, len(batch.data))
			if len(batch.data) >= batchBytes {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		mu.Lock()
		stats.widest = max(stats.widest, int64(widest))
		mu.Unlock()
		return flush()
	}
	type job struct {
		f    manifest.File
		want int
	}
	readAll := func(jobs []job) error {
		var (
			next     atomic.Int64
			wg       sync.WaitGroup
			errOnce  sync.Once
			firstErr error
			failed   atomic.Bool
		)
		for _, j := range jobs {
			r.opts.Progress.AddTotal(j.f.Rows)
		}
		for range max(1, min(r.workers(), len(jobs))) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var enc encoder
				batch := &recBatch{offs: []int{0}}
				for !failed.Load() {
					i := int(next.Add(1)) - 1
					if i >= len(jobs) {
						return
					}
					if err := read(jobs[i].f, jobs[i].want, &enc, batch); err != nil {
						errOnce.Do(func() { firstErr = err })
						failed.Store(true)
						return
					}
				}
			}()
		}
		wg.Wait()
		return firstErr
	}
	var jobs []job
	for _, f := range w.fresh {
		jobs = append(jobs, job{f, -1})
	}
	if err := readAll(jobs); err != nil {
		return nil, nil, err
	}
	jobs = jobs[:0]
	for b := range w.layout.Buckets {
		if parts.rows[b] == 0 {
			continue
		}
		stats.touched++
		for _, f := range w.bucketed[b] {
			jobs = append(jobs, job{f, b})
		}
	}
	if err := readAll(jobs); err != nil {
		return nil, nil, err
	}
	// Remove the inputs in committed order, whichever worker read them.
	slices.SortFunc(stats.inputs, func(a, b manifest.File) int { return cmp.Compare(w.order[a.Key], w.order[b.Key]) })
	if err := parts.finish(); err != nil {
		return nil, nil, err
	}
	var todo []int
	for b := range w.layout.Buckets {
		if parts.rows[b] > 0 {
			todo = append(todo, b)
		}
	}
	// Buckets are independent: sort, merge and encode several at once, one
	// per core, each with its share of the memory budget.
	workers := max(1, min(r.workers(), len(todo)))
	attempt := manifest.NewID()[:12]
	var seq atomic.Int64
	outs := make([]*outputs, workers)
	for i := range outs {
		o := &outputs{ctx: ctx, progress: r.opts.Progress, bucket: r.bucket, log: r.log, runID: runID, attempt: attempt, seq: &seq, build: r.opts.Build,
			target: r.opts.TargetFileBytes, rowGroup: r.budget.rowGroupBytes / int64(workers), modKind: w.modKind,
			kv: map[string]string{manifest.MetaModel: r.opts.Model, manifest.MetaRunID: runID, manifest.MetaKind: manifest.KindDedupe,
				manifest.MetaFormatVersion: fmt.Sprint(manifest.FormatVersion)}}
		if len(stats.inputs) > 0 {
			o.schemaID = stats.inputs[0].SchemaID
		}
		// A codec each: the zstd codec encodes one page at a time.
		if o.codec, err = formats.NewCodec(r.opts.Compression); err != nil {
			return nil, nil, err
		}
		if schema != nil {
			o.schema = parquet.NewSchema(schema.Name(), withCodec(schema, o.codec))
		}
		outs[i] = o
	}
	var (
		next     atomic.Int64
		dropped  atomic.Int64
		runs     atomic.Int64
		failed   atomic.Bool
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	for _, out := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srt := &sorter{dir: dir, budget: r.budget.sortBytes / int64(workers)}
			defer func() { runs.Add(int64(srt.runsWritten)) }()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				b := todo[i]
				err := srt.run(parts.files[b], parts.bytes[b], func(rec []byte) error {
					if recFlags(rec)&flagDeleted != 0 && w.floor != nil && (recFlags(rec)&flagModNull != 0 || recMod(rec) < *w.floor) {
						dropped.Add(1)
						return nil
					}
					return out.add(b, rec)
				})
				if err == nil {
					err = out.endBucket()
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					out.abort()
					return
				}
				// The bucket's spill file is done with: free its disk now.
				parts.drop(b)
			}
		}()
	}
	wg.Wait()
	all := &outputs{}
	for _, o := range outs {
		all.files = append(all.files, o.files...)
		all.bytesOut += o.bytesOut
		all.rowsOut += o.rowsOut
	}
	if firstErr != nil {
		r.discard(all.files)
		return nil, nil, firstErr
	}
	// Commit the files in bucket order, as one worker would have.
	slices.SortStableFunc(all.files, func(a, b manifest.File) int { return cmp.Compare(*a.Bucket, *b.Bucket) })
	stats.dropped = dropped.Load()
	stats.sortRuns = int(runs.Load())
	return all, stats, nil
}

// recBatch holds encoded records on their way to the spill files.
type recBatch struct {
	data    []byte
	offs    []int // offs[i]:offs[i+1] is record i
	buckets []int
}

func (b *recBatch) reset() {
	b.data, b.offs, b.buckets = b.data[:0], b.offs[:1], b.buckets[:0]
}
