package dedupe

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"unsafe"
)

// With few buckets, the partition stage sorts the runs itself: each worker
// gathers the records it decodes in its share of the sort budget, sorts
// them by bucket and key when the share is full and writes the winners as
// one run, bucket after bucket. The merge then reads each bucket's segment
// of every run, as it reads a sorted run of its own. The records cross the
// disk once instead of twice (into a spill file by bucket, then out of it
// into sorted runs), and the sorts run on every worker while the others
// decode, whatever the bucket count.
//
// With many buckets, a run's segments would be short and a bucket's merge
// would read many of them, so the records go to a spill file by bucket and
// each bucket is sorted on its own (sorter.run).

// minSegment is the least average size of one bucket's segment of a run
// for the partition stage to sort the runs.
const minSegment = 1 << 20

// presorts says whether the partition stage of a layout of that many
// buckets sorts the runs, each worker in sortShare bytes of records and
// entries.
func presorts(buckets int, sortShare int64) bool {
	return int64(buckets)*minSegment <= arenaBytes(sortShare)
}

// arenaBytes is the records' part of a sort budget: a quarter goes to the
// sort entries, about 30 bytes of entry for 100 of record.
func arenaBytes(budget int64) int64 { return budget * 3 / 4 }

// maxEntries is how many sort entries the rest of the budget holds.
func maxEntries(budget int64) int {
	return int(max(1024, budget/4/int64(unsafe.Sizeof(sortEnt{}))))
}

// presorted is the runs the partition stage wrote; every worker appends
// to runs under the partitioner's lock.
type presorted struct {
	runs []*bucketedRun
}

// bucketedRun is one run of every bucket: at[b]:at[b+1] of f is bucket
// b's segment, its winners in key order.
type bucketedRun struct {
	f  *os.File
	at []int64
}

// segments returns bucket b's segments of every run that has one.
func (p *presorted) segments(b int) []sortRun {
	var segs []sortRun
	for _, r := range p.runs {
		if n := r.at[b+1] - r.at[b]; n > 0 {
			segs = append(segs, sortRun{r: io.NewSectionReader(r.f, r.at[b], n)})
		}
	}
	return segs
}

func (p *presorted) close() {
	for _, r := range p.runs {
		r.f.Close()
		os.Remove(r.f.Name())
	}
	p.runs = nil
}

// runBuilder is a partition worker's sort run being filled: the records
// of every bucket in one arena, the sort entries of each bucket apart.
// Each bucket's entries take at most their share of the entries' budget
// (the hash spreads the records evenly); a bucket whose share is full
// writes the run out early.
type runBuilder struct {
	p       *partitioner
	s       sorter // its arena; one chunk at a time, sorted by this worker
	arena   int    // the arena's most bytes
	ents    [][]sortEnt
	maxEnts int // of one bucket
}

func newRunBuilder(p *partitioner, budget int64) *runBuilder {
	buckets := p.w.layout.Buckets
	return &runBuilder{p: p, s: sorter{dir: p.dir, budget: budget, par: 1},
		arena: int(arenaBytes(budget)), ents: make([][]sortEnt, buckets),
		maxEnts: max(1024, maxEntries(budget)/buckets)}
}

// add copies the record of bucket b into the run, and writes the run out
// first when the record does not fit.
func (rb *runBuilder) add(b int, rec []byte) error {
	s := &rb.s
	if len(s.arena)+len(rec) > rb.arena || len(rb.ents[b]) >= rb.maxEnts {
		if err := rb.flush(); err != nil {
			return err
		}
	}
	start := len(s.arena)
	// Grow by doubling up to the budget, not past it as append would.
	if start+len(rec) > cap(s.arena) {
		s.arena = slices.Grow(s.arena, max(min(2*cap(s.arena), rb.arena), 64<<10, start+len(rec))-start)
	}
	e := rb.ents[b]
	if len(e) == cap(e) {
		e = slices.Grow(e, min(max(2*cap(e), 256), rb.maxEnts)-len(e))
	}
	s.arena = append(s.arena, rec...)
	rb.ents[b] = append(e, newSortEnt(rec, start))
	return nil
}

// flush sorts the run and writes its winners, bucket after bucket.
func (rb *runBuilder) flush() error {
	s := &rb.s
	if len(s.arena) == 0 {
		return nil
	}
	f, err := s.dir.create("run")
	if err != nil {
		return err
	}
	buckets := len(rb.ents)
	run := &bucketedRun{f: f, at: make([]int64, buckets+1)}
	rows := make([]int64, buckets)
	w := bufio.NewWriterSize(f, 256<<10)
	var pos int64
	for b, e := range rb.ents {
		run.at[b] = pos
		rows[b] = int64(len(e))
		if len(e) == 0 {
			continue
		}
		s.chunks = s.sortChunk(e)
		err = s.winners(func(rec []byte) error {
			pos += int64(len(rec))
			_, err := w.Write(rec)
			return err
		})
		if err != nil {
			break
		}
		rb.ents[b] = e[:0]
	}
	run.at[buckets] = pos
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("write sort run: %w", err)
	}
	s.arena = s.arena[:0]
	p := rb.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sorted.runs = append(p.sorted.runs, run)
	p.stats.sortRuns++
	p.stats.spilled += pos
	for b, n := range rows {
		p.parts.rows[b] += n
	}
	return nil
}

// release frees the run's memory for the merge.
func (rb *runBuilder) release() { rb.s.arena, rb.ents = nil, nil }
