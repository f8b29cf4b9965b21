package reconcile

import (
	"math"
	"runtime/debug"
	"sync"

	"github.com/highwater-dev/highwater/internal/memstat"
)

// memory divides Options.MemoryLimit between the pages the Go runtime
// does not manage and the Go runtime's own limit, which bounds the heap
// where every record and buffer lives.
//
// The pages outside the runtime are mostly the binary's own: a binary
// linking every object-store SDK keeps 30-40 MiB of them resident, and
// more as code runs for the first time (the lake's decoders after the
// start, a repair's encoders at the end). A reserve fixed in advance is
// either too large or, under a tight limit, too small; so they are
// measured: at the start, every few thousand rows while both sides are
// read, before each partition is judged and before each repair batch.
// Most of them are code that ran once, at the start: where they take
// more than a quarter of the limit, they are dropped (the kernel faults
// back from its page cache those still in use, about 15 of 38 MiB):
// kept, they left a reconcile under --memory-limit 64MiB a runtime below
// the least it works in, held over its own limit, collecting without
// pause (three times slower) and a few MiB under the limit at best. They
// are dropped again only when they come to exceed by the headroom what
// they were at the last drop, so that a run drops them a few times at
// most.
// The Go limit follows them down and never up (the kernel may drop file
// pages it faults back later), and the judges' budget is a quarter of the
// Go limit at the time, counting the dropped pages: a partition judged
// after the pages grew gets a smaller share, and splits again if it no
// longer fits.
type memory struct {
	limit int64

	mu      sync.Mutex
	goLimit int64
	prev    int64 // the Go limit before, restored by release
	// short is set when the limit leaves less than the least Go limit;
	// outside is then what was measured outside the runtime.
	short   bool
	outside int64
	// dropped is what the pages outside the runtime were when they were
	// last dropped, 0 before.
	dropped int64
}

const (
	// unmeasuredReserve stands for the pages outside the runtime where
	// /proc cannot be read.
	unmeasuredReserve = 40 << 20
	// headroom is kept beyond the last measurement: pages touched before
	// the next one, and the runtime's own slack.
	headroom = 8 << 20
	// leastGoLimit is the least heap a reconcile works in.
	leastGoLimit = 16 << 20
	// measureRows is how many rows a reader handles between measurements.
	measureRows = 16 << 10
)

func newMemory(limit int64) *memory {
	m := &memory{limit: limit, goLimit: math.MaxInt64, prev: debug.SetMemoryLimit(-1)}
	m.measure()
	return m
}

// budget is the judges' budget as last measured.
func (m *memory) budget() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.share()
}

// share counts the pages last dropped as if they had all come back: the
// buffers sized by it cannot shrink when they do, the Go limit can.
func (m *memory) share() int64 {
	g := m.goLimit
	if m.dropped > 0 {
		g = min(g, m.limit-m.dropped-headroom)
	}
	return max(g/4, 2<<20)
}

// measure lowers the Go limit to what the limit leaves beside the pages
// resident outside the runtime now, dropped first when they take much of
// the limit, and returns the judges' budget. When
// the process is over the limit although the runtime keeps to its own
// (freed pages not yet returned to the kernel), it returns them now.
func (m *memory) measure() (budget int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := memstat.ReadResident()
	if err == nil && res.File > m.limit/4 && res.File >= m.dropped+headroom {
		m.dropped = res.File
		if _, err := memstat.DropFilePages(); err == nil {
			if now, err := memstat.ReadResident(); err == nil {
				res = now
			}
		}
	}
	outside := int64(unmeasuredReserve)
	if err == nil {
		outside = res.File
	}
	want := m.limit - outside - headroom
	if want < leastGoLimit {
		want, m.short, m.outside = leastGoLimit, true, outside
	}
	if want < m.goLimit {
		m.goLimit = want
		debug.SetMemoryLimit(want)
	}
	if err == nil && res.Anon+res.File > m.limit-headroom/2 {
		debug.FreeOSMemory()
	}
	return m.share()
}

// least is the least limit that would have held when the limit fell
// short.
func (m *memory) least() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.outside + headroom + leastGoLimit
}

// release restores the Go limit that was set before.
func (m *memory) release() { debug.SetMemoryLimit(m.prev) }
