package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// A Log keeps the last state it folded, so that a process reading the
// state again (an export reads it to plan and again to commit) reads each
// commit and checkpoint of the log once. The cache saves the reads of what
// it folded, never the look for what is newer: every read lists the log
// from the proven checkpoint the first read listed from (so it lists no
// less than a read without the cache would), finds the head in that
// listing and folds the commits above the cached seq.
//
// Commits and checkpoints are written create-if-absent and never
// rewritten, so a listing that disagrees with what was folded (one of them
// gone, or listed with another size or time, as when the log was deleted
// and written anew) or that shows a gap, or a head below the cached seq,
// means the log contradicts the cache: it is dropped, and the state is
// read as though there had been none, so that whatever stops a reader
// without the cache stops it with it.

// stateCache is a Log's last folded state.
type stateCache struct {
	mu sync.Mutex
	// st is folded up to st.Seq; nobody outside the cache holds it, and it
	// is handed out only as copies.
	st *State
	// from is the seq the listing starts at: that of the proven checkpoint
	// the first read listed after, or 1 for the whole log.
	from int64
	// attrs are the listed attributes of the commits and checkpoints at or
	// below st.Seq, by name.
	attrs map[string]objstore.Attrs
}

func (c *stateCache) get() (st *State, from int64, attrs map[string]objstore.Attrs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st, c.from, c.attrs
}

// remember caches st, folded on listing ls (which starts at from), unless
// the cache holds a newer state already.
func (c *stateCache) remember(from int64, ls *Listing, st *State) {
	attrs := make(map[string]objstore.Attrs)
	for name, a := range ls.attrs {
		// From's checkpoint is not listed again (see readCached).
		if seq, cp, ok := parseLogName(name); ok && seq <= st.Seq && !(cp && seq == from) {
			attrs[name] = a
		}
	}
	cp := st.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st != nil && c.st.Seq > st.Seq {
		return
	}
	c.st, c.from, c.attrs = cp, from, attrs
}

func (c *stateCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st, c.from, c.attrs = nil, 0, nil
}

// readCached folds the state up to the true head from the cache. ok is
// false when there is no cache or the log contradicts it (then it is
// dropped, and the caller reads the state anew).
func (l *Log) readCached(ctx context.Context) (st *State, ok bool, err error) {
	cached, from, attrs := l.cache.get()
	if cached == nil {
		return nil, false, nil
	}
	// After from's checkpoint, as listTail lists: from's commit, which it
	// folded up to, is listed, and must still be there.
	ls := &Listing{First: from}
	if err := l.listInto(ctx, ls, checkpointKey(from)); err != nil {
		return nil, false, err
	}
	head, err := ls.Head()
	if err != nil || head < cached.Seq || !sameAttrs(attrs, ls.attrs) {
		l.cache.drop()
		return nil, false, nil
	}
	st = l.trustedCheckpoint(ctx, ls, cached.clone())
	if err := l.foldTo(ctx, st, head, nil); err != nil {
		return nil, false, err
	}
	l.cache.remember(from, ls, st)
	return st, true, nil
}

// sameAttrs reports whether every name in was is listed in now as it was.
func sameAttrs(was, now map[string]objstore.Attrs) bool {
	for name, a := range was {
		b, ok := now[name]
		if !ok || b.Size != a.Size || !b.ModTime.Equal(a.ModTime) {
			return false
		}
	}
	return true
}

// clone returns a deep copy of s, as a reader of its JSON form would
// decode it.
func (s *State) clone() *State {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("encode state: %v", err)) // our own types always encode
	}
	var c State
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("decode state: %v", err)) // it was just encoded
	}
	return &c
}
