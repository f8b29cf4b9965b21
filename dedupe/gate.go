package dedupe

import "sync"

// gate is a semaphore of bytes: the output row groups of every bucket
// being rewritten take their bytes from it before they go to the encoders
// and give them back once appended to their file, so that the row groups
// in flight stay within their share of the memory limit however the
// encoders, the buckets and the collector are scheduled.
type gate struct {
	mu   sync.Mutex
	cond sync.Cond
	cap  int64
	used int64
}

func newGate(capacity int64) *gate {
	g := &gate{cap: capacity}
	g.cond.L = &g.mu
	return g
}

// tryAcquire takes n bytes if they are free. A request larger than the
// whole gate (a row group of one very wide row) is granted when nothing
// else is held, so that it never waits for ever.
func (g *gate) tryAcquire(n int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grant(n)
}

// acquire waits until n bytes are free. The caller must hold none: what
// it waits for is held by others, who give it back without waiting.
func (g *gate) acquire(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for !g.grant(n) {
		g.cond.Wait()
	}
}

func (g *gate) grant(n int64) bool {
	if g.used > 0 && g.used+n > g.cap {
		return false
	}
	g.used += n
	return true
}

func (g *gate) release(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.used -= n
	g.mu.Unlock()
	g.cond.Broadcast()
}
