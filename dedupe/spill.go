package dedupe

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/highwater-dev/highwater/internal/spill"
)

// spillDir is a run's private directory of spill files, removed at the end
// whatever happens.
type spillDir struct {
	dir string
	n   atomic.Int64 // several workers create files
}

func newSpillDir(parent string) (*spillDir, error) {
	dir, err := os.MkdirTemp(parent, "highwater-dedupe-*")
	if err != nil {
		return nil, fmt.Errorf("create spill directory: %w", err)
	}
	return &spillDir{dir: dir}, nil
}

func (s *spillDir) create(prefix string) (*os.File, error) {
	f, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("%s-%06d", prefix, s.n.Add(1))))
	if err != nil {
		return nil, fmt.Errorf("create spill file: %w", err)
	}
	return f, nil
}

func (s *spillDir) remove() { os.RemoveAll(s.dir) }

// partitions holds one spill file per bucket. Files are opened on first
// use, so that an incremental dedupe touching few buckets opens few files.
type partitions struct {
	dir     *spillDir
	bufSize int
	files   []*os.File
	ws      []*bufio.Writer
	rows    []int64
	bytes   []int64
}

func newPartitions(dir *spillDir, buckets int, bufferBytes int64) *partitions {
	return &partitions{
		dir:     dir,
		bufSize: int(max(4<<10, min(1<<20, bufferBytes/int64(buckets)))),
		files:   make([]*os.File, buckets),
		ws:      make([]*bufio.Writer, buckets),
		rows:    make([]int64, buckets),
		bytes:   make([]int64, buckets),
	}
}

func (p *partitions) add(bucket int, rec []byte) error {
	w := p.ws[bucket]
	if w == nil {
		f, err := p.dir.create(fmt.Sprintf("bucket-%05d", bucket))
		if err != nil {
			return err
		}
		p.files[bucket] = f
		w = bufio.NewWriterSize(f, p.bufSize)
		p.ws[bucket] = w
	}
	p.rows[bucket]++
	p.bytes[bucket] += int64(len(rec))
	if _, err := w.Write(rec); err != nil {
		return fmt.Errorf("write spill file: %w", err)
	}
	return nil
}

// finish flushes every file and rewinds it for reading.
func (p *partitions) finish() error { return spill.FlushAll(p.ws, p.files) }

func (p *partitions) close() {
	for b := range p.files {
		p.drop(b)
	}
}

// drop removes a bucket's spill file, to free its disk early.
func (p *partitions) drop(b int) {
	if f := p.files[b]; f != nil {
		f.Close()
		os.Remove(f.Name())
		p.files[b] = nil
	}
}

// recordReader reads records one at a time from a spill file.
type recordReader struct {
	r   *bufio.Reader
	buf []byte
}

// next returns the next record, valid until the following call; io.EOF at
// the end.
func (rr *recordReader) next() ([]byte, error) {
	hdr, err := rr.r.Peek(headerLen)
	if err != nil {
		if errors.Is(err, io.EOF) && len(hdr) == 0 {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("read spill file: %w", err)
	}
	n := recLen(hdr)
	rr.buf = slices.Grow(rr.buf[:0], n)[:n]
	if _, err := io.ReadFull(rr.r, rr.buf); err != nil {
		return nil, fmt.Errorf("read spill file: %w", err)
	}
	return rr.buf, nil
}

// sorter finds the winner of every key of one bucket's spill file within
// a memory budget: it sorts runs that fit, keeps only each run's winners,
// spills the runs when there are several, and merges them.
type sorter struct {
	dir    *spillDir
	budget int64
	arena  []byte
	offs   []sortEnt
	// par is how many goroutines sort a run: the run's entries are sorted
	// in par chunks at once, then merged as they are emitted.
	par    int
	chunks [][]sortEnt
	// runsWritten counts sort runs spilled, for the log and the tests;
	// spilled the bytes of them and of their merges.
	runsWritten int
	spilled     int64
	// mergeWidth is the most runs one merge read at once.
	mergeWidth int
}

// run sorts the records of f, of size bytes, and emits each key's winner
// in key order, of them and of the sorted runs srcs.
func (s *sorter) run(f io.Reader, size int64, srcs []recSource, emit func(rec []byte) error) error {
	// A quarter of the budget goes to the sort entries: about 30 bytes of
	// entry for 100 of record.
	if want := min(size, s.budget*3/4); s.arena == nil || int64(cap(s.arena)) < want {
		s.arena = make([]byte, 0, want)
	}
	maxEnts := int(max(1024, s.budget/4/int64(unsafe.Sizeof(sortEnt{}))))
	if s.offs == nil {
		s.offs = make([]sortEnt, 0, min(maxEnts, int(size/headerLen)+1))
	}
	in := &recordReader{r: bufio.NewReaderSize(f, 256<<10)}
	var runs []sortRun
	for {
		eof, err := s.fill(in, maxEnts)
		if err != nil {
			closeRuns(runs)
			return err
		}
		s.sortArena()
		if eof && len(runs) == 0 && len(srcs) == 0 {
			// Everything fitted: no run touches the disk.
			return s.winners(emit)
		}
		if len(s.offs) > 0 {
			rf, err := s.writeRun()
			if err != nil {
				closeRuns(runs)
				return err
			}
			runs = append(runs, sortRun{r: rf, own: rf})
		}
		if eof {
			break
		}
	}
	s.arena, s.offs = nil, nil // the merge needs the memory
	return s.mergeRuns(runs, srcs, emit)
}

// sortRun is a sorted run of records that a merge reads from the disk: a
// whole file of its own (own, removed once merged), or a bucket's segment
// of a run that the partition stage wrote for every bucket.
type sortRun struct {
	r   io.Reader
	own *os.File
}

func closeRuns(runs []sortRun) {
	for _, r := range runs {
		if r.own != nil {
			r.own.Close()
			os.Remove(r.own.Name())
		}
	}
}

// mergeRuns emits the winner of each key of runs and srcs, in key order.
// Each run read at once takes a buffer of at least minMergeBuf, so many
// runs are merged a group at a time into fewer, longer runs until one
// merge reads them all within the budget. It removes the runs it owns.
func (s *sorter) mergeRuns(runs []sortRun, srcs []recSource, emit func(rec []byte) error) error {
	defer func() { closeRuns(runs) }()
	for fanIn := max(2, s.fanIn()-len(srcs)); len(runs) > fanIn; {
		var next []sortRun
		for len(runs) > 0 {
			group := runs[:min(fanIn, len(runs))]
			rf, err := s.mergeRun(group)
			if err != nil {
				runs = append(next, runs...) // removed by the deferred func
				return err
			}
			runs = runs[len(group):]
			next = append(next, sortRun{r: rf, own: rf})
		}
		runs = next
	}
	return s.merge(runs, srcs, emit)
}

// minMergeBuf is the least read buffer of one run in a merge: below it
// the merge spends its time in reads.
const minMergeBuf = 16 << 10

// fanIn is how many runs one merge reads at once: their buffers take half
// of the budget.
func (s *sorter) fanIn() int {
	return int(max(2, s.budget/2/minMergeBuf))
}

// mergeRun merges a group of runs into one run of their winners, and
// removes those it owns.
func (s *sorter) mergeRun(group []sortRun) (*os.File, error) {
	f, err := s.dir.create("run")
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	err = s.merge(group, nil, func(rec []byte) error {
		s.spilled += int64(len(rec))
		_, err := w.Write(rec)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("merge sort runs: %w", err)
	}
	closeRuns(group)
	return f, nil
}

// fill reads records into the arena until the budget is reached.
func (s *sorter) fill(in *recordReader, maxEnts int) (eof bool, err error) {
	s.arena, s.offs = s.arena[:0], s.offs[:0]
	for {
		hdr, err := in.r.Peek(headerLen)
		if err != nil {
			if errors.Is(err, io.EOF) && len(hdr) == 0 {
				return true, nil
			}
			return false, fmt.Errorf("read spill file: %w", err)
		}
		n := recLen(hdr)
		if (len(s.arena)+n > cap(s.arena) || len(s.offs) >= maxEnts) && len(s.offs) > 0 {
			return false, nil
		}
		start := len(s.arena)
		s.arena = slices.Grow(s.arena, n)[:start+n]
		if _, err := io.ReadFull(in.r, s.arena[start:]); err != nil {
			return false, fmt.Errorf("read spill file: %w", err)
		}
		s.offs = append(s.offs, newSortEnt(s.arena[start:], start))
	}
}

// sortEnt is one record of the arena with the first 24 bytes of its sort
// key: most comparisons end within them (an integer key, modified-at and
// most of the version), so they rarely touch the arena, whose records are
// scattered in memory.
type sortEnt struct {
	k0, k1, k2 uint64
	off        int
}

func newSortEnt(rec []byte, off int) sortEnt {
	k := recSort(rec)
	var p [24]byte
	copy(p[:], k) // zero padding: a tie falls back to the whole key
	return sortEnt{binary.BigEndian.Uint64(p[:]), binary.BigEndian.Uint64(p[8:]), binary.BigEndian.Uint64(p[16:]), off}
}

// minChunk is the fewest entries worth a goroutine of their own.
const minChunk = 16 << 10

// sortArena sorts the run's entries in up to par chunks at once.
func (s *sorter) sortArena() {
	n := len(s.offs)
	p := max(1, min(s.par, n/minChunk))
	sorted := make([][][]sortEnt, p)
	var wg sync.WaitGroup
	for i := range p {
		c := s.offs[n*i/p : n*(i+1)/p]
		wg.Go(func() { sorted[i] = s.sortChunk(c) })
	}
	wg.Wait()
	s.chunks = s.chunks[:0]
	for _, cs := range sorted {
		s.chunks = append(s.chunks, cs...)
	}
}

// maxNatural is the most stretches already in order that a chunk is left
// in, for winners to merge, rather than sorted.
const maxNatural = 4

// sortChunk sorts c, or splits it into the few stretches already in key
// order that it is made of: a worker's records come a row group at a
// time, and an export's row groups often hold their keys in order (a key
// that grows with the modified-at, as serial ids do), so a run is then a
// handful of sorted stretches, merged as they are emitted at the cost of
// one pass.
func (s *sorter) sortChunk(c []sortEnt) [][]sortEnt {
	var parts [][]sortEnt
	start := 0
	for i := 1; i < len(c); i++ {
		if s.compare(c[i-1], c[i]) > 0 {
			if len(parts) == maxNatural-1 {
				slices.SortFunc(c, s.compare)
				return [][]sortEnt{c}
			}
			parts = append(parts, c[start:i])
			start = i
		}
	}
	return append(parts, c[start:])
}

func (s *sorter) compare(x, y sortEnt) int {
	if c := cmp.Compare(x.k0, y.k0); c != 0 {
		return c
	}
	if c := cmp.Compare(x.k1, y.k1); c != 0 {
		return c
	}
	if c := cmp.Compare(x.k2, y.k2); c != 0 {
		return c
	}
	return bytes.Compare(recSort(s.arena[x.off:]), recSort(s.arena[y.off:]))
}

// winners emits the first record of each key from the sorted chunks,
// merging them: no two records have the same sort key (it ends with the
// record's position in the input), so the order is the one a single sort
// gives.
func (s *sorter) winners(emit func(rec []byte) error) error {
	chunks := s.chunks
	var prev []byte
	for {
		best := -1
		for i, c := range chunks {
			if len(c) > 0 && (best < 0 || s.compare(c[0], chunks[best][0]) < 0) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		e := chunks[best][0]
		chunks[best] = chunks[best][1:]
		rec := s.arena[e.off:]
		rec = rec[:recLen(rec)]
		k := recKey(rec)
		if prev != nil && bytes.Equal(k, prev) {
			continue
		}
		prev = k
		if err := emit(rec); err != nil {
			return err
		}
	}
}

// writeRun spills the sorted arena's winners.
func (s *sorter) writeRun() (*os.File, error) {
	f, err := s.dir.create("run")
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	err = s.winners(func(rec []byte) error {
		s.spilled += int64(len(rec))
		_, err := w.Write(rec)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write sort run: %w", err)
	}
	s.runsWritten++
	return f, nil
}

// merge k-way merges sorted runs, spilled ones and srcs, and emits the
// first record of each key. Each spilled run's reader buffers a share of
// the budget.
func (s *sorter) merge(runs []sortRun, srcs []recSource, emit func(rec []byte) error) error {
	s.mergeWidth = max(s.mergeWidth, len(runs)+len(srcs))
	bufSize := int(max(minMergeBuf, min(1<<20, s.budget/int64(2*max(1, len(runs))))))
	h := &runHeap{}
	all := slices.Clone(srcs)
	for _, r := range runs {
		all = append(all, &recordReader{r: bufio.NewReaderSize(r.r, bufSize)})
	}
	for _, rr := range all {
		rec, err := rr.next()
		if errors.Is(err, io.EOF) {
			continue
		}
		if err != nil {
			return err
		}
		h.items = append(h.items, runHead{rr: rr, rec: rec})
	}
	heap.Init(h)
	var prev []byte
	for h.Len() > 0 {
		top := &h.items[0]
		k := recKey(top.rec)
		if prev == nil || !bytes.Equal(k, prev) {
			if err := emit(top.rec); err != nil {
				return err
			}
			prev = append(prev[:0], k...)
		}
		rec, err := top.rr.next()
		if errors.Is(err, io.EOF) {
			heap.Pop(h)
			continue
		}
		if err != nil {
			return err
		}
		top.rec = rec
		heap.Fix(h, 0)
	}
	return nil
}

type runHead struct {
	rr  recSource
	rec []byte
}

type runHeap struct{ items []runHead }

func (h *runHeap) Len() int { return len(h.items) }
func (h *runHeap) Less(i, j int) bool {
	return bytes.Compare(recSort(h.items[i].rec), recSort(h.items[j].rec)) < 0
}
func (h *runHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *runHeap) Push(x any)    { h.items = append(h.items, x.(runHead)) }
func (h *runHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
