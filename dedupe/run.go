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
	"github.com/parquet-go/parquet-go/compress"
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
	*res = Result{Layout: w.layout, FullRewrite: w.full, Rounds: res.Rounds, LeastMemoryLimit: res.LeastMemoryLimit}
	res.BucketsTouched, res.InputFiles, res.InputBytes, res.InputRows = stats.touched, len(stats.inputs), stats.inputBytes, stats.inputRows
	res.OutputFiles, res.OutputBytes, res.OutputRows = len(out.files), out.bytesOut, out.rowsOut
	res.TombstonesDropped, res.SortRuns, res.RowGroupsAtOnce = stats.dropped, stats.sortRuns, stats.inFlight
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
	inFlight   int
	widest     int64 // the largest row, encoded
	// rowGroupsHeld is how many output row groups may be in memory at
	// once, over which the row-group budget is split.
	rowGroupsHeld int
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
	// Input files are decoded on every core, row group by row group so that
	// one large file keeps every core busy too; mu guards what they share:
	// the schema, the stats and the spill files, which take records in
	// batches.
	var mu sync.Mutex
	const batchBytes = 256 << 10
	open := func(f manifest.File) (*inputFile, error) {
		in, err := openInput(ctx, r.bucket, r.log.Key(f.Key), dir)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if schema == nil {
			schema = in.pf.Schema()
			if sh, err = newShape(schema, *w.base.Identity); err != nil {
				in.close()
				return nil, fmt.Errorf("read %s: %w", f.Key, err)
			}
		} else if !parquet.EqualNodes(schema, in.pf.Schema()) {
			in.close()
			return nil, fmt.Errorf("read %s: its Parquet schema differs from the other inputs' (the model's schema changed): dedupe across schema changes is not supported yet; a --full-refresh export rewrites the model in one schema", f.Key)
		}
		stats.inputs = append(stats.inputs, f)
		stats.inputBytes += f.Bytes
		return in, nil
	}
	// readGroup partitions the rows of one row group, whose first row is
	// the file's row first.
	readGroup := func(in *inputFile, f manifest.File, want, group int, first int64, enc *encoder, batch *recBatch) error {
		mu.Lock()
		enc.sh = sh
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
		// The row's position in the committed set breaks the last ties.
		base := uint64(w.order[f.Key]) << 36
		n := uint64(first)
		var widest int
		err := in.eachRowOf(ctx, group, func(row parquet.Row) error {
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
			batch.reset()
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
	// opened is an input whose row groups are being read; the last worker
	// done with it removes its local copy.
	type opened struct {
		job
		in     *inputFile
		firsts []int64 // the first row of each row group
		next   int     // the next row group to claim
		left   int     // row groups not read yet
	}
	readAll := func(jobs []job) error {
		var (
			sched    sync.Mutex // guards nextFile, queue and every opened's next and left
			nextFile int
			queue    []*opened // inputs with row groups to claim
			all      []*opened
			wg       sync.WaitGroup
			errOnce  sync.Once
			firstErr error
			failed   atomic.Bool
		)
		fail := func(err error) {
			errOnce.Do(func() { firstErr = err })
			failed.Store(true)
		}
		// claim returns a row group of an open input, else opens the next
		// input: a worker opens a file only when no row group is left.
		claim := func() (*opened, int, error) {
			sched.Lock()
			for len(queue) > 0 {
				o := queue[0]
				if o.next < len(o.firsts) {
					o.next++
					sched.Unlock()
					return o, o.next - 1, nil
				}
				queue = queue[1:]
			}
			if nextFile >= len(jobs) {
				sched.Unlock()
				return nil, 0, nil
			}
			j := jobs[nextFile]
			nextFile++
			sched.Unlock()
			in, err := open(j.f)
			if err != nil {
				return nil, 0, err
			}
			o := &opened{job: j, in: in}
			var row int64
			for _, rg := range in.pf.RowGroups() {
				o.firsts = append(o.firsts, row)
				row += rg.NumRows()
			}
			o.left = len(o.firsts)
			o.next = 1
			sched.Lock()
			all = append(all, o)
			queue = append(queue, o)
			sched.Unlock()
			return o, 0, nil
		}
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
					o, g, err := claim()
					if err != nil {
						fail(err)
						return
					}
					if o == nil {
						return
					}
					if len(o.firsts) > 0 {
						err = readGroup(o.in, o.f, o.want, g, o.firsts[g], &enc, batch)
					}
					sched.Lock()
					o.left--
					last := o.left <= 0
					sched.Unlock()
					if last {
						o.in.close()
					}
					if err != nil {
						fail(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		// After a failure, inputs whose row groups were left unread.
		for _, o := range all {
			if o.left > 0 {
				o.in.close()
			}
		}
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
	// Buckets are independent: sort and merge several at once, one per
	// core, each with its share of the memory budget. Row groups are
	// encoded apart from the merge, by as many encoders as workers shared
	// by all buckets: with fewer buckets than workers (a first dedupe of
	// under a target file is one bucket), each bucket keeps several row
	// groups in the encoders at once, and its sort sorts in parallel.
	workers := r.workers()
	compression, err := r.compression(ctx, w.base)
	if err != nil {
		return nil, nil, err
	}
	lanes := max(1, min(workers, len(todo)))
	window := max(1, workers/lanes)
	cs, err := newCodecs(workers, func() (compress.Codec, error) { return formats.NewCodec(compression) })
	if err != nil {
		return nil, nil, err
	}
	var outSchema *parquet.Schema
	if schema != nil {
		outSchema = parquet.NewSchema(schema.Name(), withCodec(schema, cs))
	}
	enc := startEncoders(workers)
	// The row group share holds the raw bytes of, per bucket, the row
	// group being filled and those in the encoders; these hold as much
	// again in encoded pages (rowGroupCharge). The gate takes what the
	// encoders hold, whatever the buckets' progress.
	stats.rowGroupsHeld = lanes * (window + 1)
	rowGroup := max(1, r.budget.rowGroupBytes/int64(stats.rowGroupsHeld))
	g := newGate(int64(lanes*window) * rowGroupCharge(rowGroup))
	// Each bucket being rewritten has one file open, whose row groups'
	// metadata grows until its footer.
	maxGroups := 1 << 30
	if schema != nil {
		maxGroups = int(max(1, r.budget.metaBytes/int64(lanes)/int64(len(schema.Columns())*groupMetaBytes)))
	}
	attempt := manifest.NewID()[:12]
	var seq atomic.Int64
	outs := make([]*outputs, lanes)
	for i := range outs {
		o := &outputs{ctx: ctx, progress: r.opts.Progress, bucket: r.bucket, log: r.log, runID: runID, attempt: attempt, seq: &seq, build: r.opts.Build,
			target: r.opts.TargetFileBytes, rowGroup: rowGroup, modKind: w.modKind, codec: cs, schema: outSchema,
			enc: enc, window: window, gate: g, maxGroups: maxGroups,
			kv: map[string]string{manifest.MetaModel: r.opts.Model, manifest.MetaRunID: runID, manifest.MetaKind: manifest.KindDedupe,
				manifest.MetaFormatVersion: fmt.Sprint(manifest.FormatVersion)}}
		if len(stats.inputs) > 0 {
			o.schemaID = stats.inputs[0].SchemaID
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
			srt := &sorter{dir: dir, budget: r.budget.sortBytes / int64(lanes), par: window}
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
	enc.stop()
	all := &outputs{}
	for _, o := range outs {
		all.files = append(all.files, o.files...)
		all.bytesOut += o.bytesOut
		all.rowsOut += o.rowsOut
		stats.inFlight = max(stats.inFlight, o.inFlight)
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
