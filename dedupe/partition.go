package dedupe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go"
)

// partitioner is the first stage: it decodes the rows of the input files
// into records and appends each to its bucket's spill file, or with few
// buckets sorts them into runs (presort.go). Input files are decoded on
// every core, row group by row group so that one large file keeps every
// core busy too.
type partitioner struct {
	r     *runner
	w     *work
	dir   *spillDir
	parts *partitions
	// sorted, when set, takes the records as sorted runs instead of parts.
	sorted *presorted

	// mu guards what the workers share: the schema, the stats, the sorted
	// runs and the spill files, which take records in batches.
	mu     sync.Mutex
	schema *parquet.Schema
	sh     *shape
	stats  *rewriteStats
}

// job is one input file to partition; want is the bucket its rows must
// all be in, or -1 for an unbucketed file.
type job struct {
	f    manifest.File
	want int
}

// partition reads the fresh files into the spill files of the buckets
// they touch, and leaves the spill files rewound for the merge.
func (p *partitioner) partition(ctx context.Context) error {
	var jobs []job
	for _, f := range p.w.fresh {
		jobs = append(jobs, job{f, -1})
	}
	if err := p.readAll(ctx, jobs); err != nil {
		return err
	}
	// The files of the touched buckets are sorted runs already: the merge
	// reads them (sortedFile), not this stage.
	for b := range p.w.layout.Buckets {
		if p.parts.rows[b] == 0 {
			continue
		}
		p.stats.touched++
		for _, f := range p.w.bucketed[b] {
			p.r.opts.Progress.AddTotal(f.Rows)
		}
	}
	return p.parts.finish()
}

// sortInputs puts the inputs in committed order, whichever worker read
// them: the commit removes them in that order.
func (p *partitioner) sortInputs() {
	slices.SortFunc(p.stats.inputs, func(a, b manifest.File) int { return cmp.Compare(p.w.order[a.Key], p.w.order[b.Key]) })
}

// readAll partitions the rows of jobs on up to one worker per file, under
// one errgroup: the first error cancels the other workers' reads.
func (p *partitioner) readAll(ctx context.Context, jobs []job) error {
	for _, j := range jobs {
		p.r.opts.Progress.AddTotal(j.f.Rows)
	}
	s := &schedule{jobs: jobs}
	g, gctx := errgroup.WithContext(ctx)
	// Every worker, however few the files: their row groups are claimed
	// one at a time.
	for range p.r.workers() {
		g.Go(func() error { return p.work(gctx, s) })
	}
	err := g.Wait()
	// After a failure, inputs whose row groups were left unread.
	for _, o := range s.all {
		if o.left > 0 {
			o.in.close()
		}
	}
	return err
}

// work is one worker: it reads row groups until none is left.
func (p *partitioner) work(ctx context.Context, s *schedule) error {
	rd := &groupReader{p: p, batch: &recBatch{offs: []int{0}}}
	if p.sorted != nil {
		rd.run = newRunBuilder(p, p.r.budget.sortBytes/int64(p.r.workers()))
		defer rd.run.release()
	}
	for ctx.Err() == nil {
		o, g, err := s.claim(ctx, p)
		if err != nil {
			return err
		}
		if o == nil {
			if rd.run != nil {
				return rd.run.flush()
			}
			return nil
		}
		if len(o.firsts) > 0 {
			err = rd.read(ctx, o, g)
		}
		if s.done(o) {
			o.in.close()
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// open opens an input and checks its schema against the others'.
func (p *partitioner) open(ctx context.Context, f manifest.File) (*inputFile, error) {
	in, err := openInput(ctx, p.r.bucket, p.r.log.Key(f.Key), p.dir)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.schema == nil {
		p.schema = in.pf.Schema()
		if p.sh, err = newShape(p.schema, *p.w.base.Identity); err != nil {
			in.close()
			return nil, fmt.Errorf("read %s: %w", f.Key, err)
		}
	} else if !parquet.EqualNodes(p.schema, in.pf.Schema()) {
		in.close()
		return nil, fmt.Errorf("read %s: its Parquet schema differs from the other inputs' (the model's schema changed): dedupe across schema changes is not supported yet; a --full-refresh export rewrites the model in one schema", f.Key)
	}
	p.stats.inputs = append(p.stats.inputs, f)
	p.stats.inputBytes += f.Bytes
	return in, nil
}

// flush appends a batch of records to their spill files.
func (p *partitioner) flush(batch *recBatch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range batch.buckets {
		if err := p.parts.add(b, batch.data[batch.offs[i]:batch.offs[i+1]]); err != nil {
			return err
		}
	}
	p.stats.inputRows += int64(len(batch.buckets))
	p.stats.spilled += int64(len(batch.data))
	p.r.opts.Progress.Add(int64(len(batch.buckets)))
	batch.reset()
	return nil
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

// schedule hands the row groups of the jobs to the workers.
type schedule struct {
	mu       sync.Mutex // guards nextFile, queue, all and every opened's next and left
	jobs     []job
	nextFile int
	queue    []*opened // inputs with row groups to claim
	all      []*opened
}

// claim returns a row group of an open input, else opens the next input:
// a worker opens a file only when no row group is left. It returns nil
// once every job is claimed.
func (s *schedule) claim(ctx context.Context, p *partitioner) (*opened, int, error) {
	s.mu.Lock()
	for len(s.queue) > 0 {
		o := s.queue[0]
		if g := o.next; g < len(o.firsts) {
			// g, not o.next after the unlock: another worker may have
			// claimed the next row group by then.
			o.next++
			s.mu.Unlock()
			return o, g, nil
		}
		s.queue = s.queue[1:]
	}
	if s.nextFile >= len(s.jobs) {
		s.mu.Unlock()
		return nil, 0, nil
	}
	j := s.jobs[s.nextFile]
	s.nextFile++
	s.mu.Unlock()
	in, err := p.open(ctx, j.f)
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
	s.mu.Lock()
	s.all = append(s.all, o)
	s.queue = append(s.queue, o)
	s.mu.Unlock()
	return o, 0, nil
}

// done counts a row group of o read, and says whether it was the last.
func (s *schedule) done(o *opened) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.left--
	return o.left <= 0
}

// batchBytes is how many bytes of records a worker gathers before it
// takes the lock of the spill files.
const batchBytes = 256 << 10

// groupReader is a worker's state: its encoder and batch, or its sort
// run, are reused from row group to row group.
type groupReader struct {
	p     *partitioner
	enc   encoder
	batch *recBatch
	run   *runBuilder // when the partition sorts runs
	rec   []byte      // the record being added to run
	// of the row group being read
	o      *opened
	base   uint64 // the file's position in the committed set, shifted
	n      uint64 // the ordinal of the next row
	widest int
	bytes  int64 // of the row group's records
}

// read partitions the rows of row group g of o.
func (rd *groupReader) read(ctx context.Context, o *opened, g int) error {
	p := rd.p
	p.mu.Lock()
	rd.enc.sh = p.sh
	p.mu.Unlock()
	// The row's position in the committed set breaks the last ties.
	rd.o, rd.base, rd.n, rd.widest, rd.bytes = o, uint64(p.w.order[o.f.Key])<<36, uint64(o.firsts[g]), 0, 0
	first := rd.n
	if err := o.in.eachRowOf(ctx, g, rd.add); err != nil {
		rd.batch.reset()
		return err
	}
	p.mu.Lock()
	p.stats.widest = max(p.stats.widest, int64(rd.widest))
	p.stats.recordBytes += rd.bytes
	if rd.run != nil {
		p.stats.inputRows += int64(rd.n - first)
	}
	p.mu.Unlock()
	if rd.run != nil {
		p.r.opts.Progress.Add(int64(rd.n - first))
		return nil
	}
	return p.flush(rd.batch)
}

// add encodes one row into the sort run, or into the batch, which it
// flushes once full.
func (rd *groupReader) add(row parquet.Row) error {
	batch := rd.batch
	dst := &batch.data
	if rd.run != nil {
		rd.rec = rd.rec[:0]
		dst = &rd.rec
	}
	var h uint64
	before := len(*dst)
	*dst, h = rd.enc.encode(*dst, row, rd.base|rd.n)
	rd.widest = max(rd.widest, len(*dst)-before)
	rd.bytes += int64(len(*dst) - before)
	rd.n++
	b := rd.p.w.layout.bucketOf(h)
	if rd.o.want >= 0 && b != rd.o.want {
		return fmt.Errorf("read %s: a row of bucket %d is in a file of bucket %d: the layout is broken", rd.o.f.Key, b, rd.o.want)
	}
	if rd.run != nil {
		return rd.run.add(b, rd.rec)
	}
	batch.buckets = append(batch.buckets, b)
	batch.offs = append(batch.offs, len(batch.data))
	if len(batch.data) >= batchBytes {
		return rd.p.flush(batch)
	}
	return nil
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
