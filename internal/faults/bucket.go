package faults

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Bucket wraps a real bucket and injects the failures of an upload that a
// test picks by key. Every other call goes to the wrapped bucket. It
// records the key of every Put it is asked for, in order.
type Bucket struct {
	objstore.Bucket
	// Fail picks the Puts that fail part way, as with a store that resets
	// the connection mid-upload: such a Put reads After bytes of the body,
	// then returns Err, and the store keeps nothing of it.
	Fail  func(key string) bool
	After int64
	Err   error
	// Hold picks the Puts that, once the whole body is sent, wait up to
	// MaxHold before the store takes the object, as with a slow store's
	// last answer. A Put whose context ends meanwhile fails and leaves
	// nothing.
	Hold    func(key string) bool
	MaxHold time.Duration

	mu   sync.Mutex
	puts []string
}

func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	b.mu.Lock()
	b.puts = append(b.puts, key)
	b.mu.Unlock()
	switch {
	case b.Fail != nil && b.Fail(key):
		if _, err := io.CopyN(io.Discard, r, b.After); err != nil {
			return err
		}
		return b.Err
	case b.Hold != nil && b.Hold(key):
		r = &heldReader{ctx: ctx, r: r, hold: b.MaxHold}
	}
	return b.Bucket.Put(ctx, key, r, opts)
}

// Puts returns the keys of the Puts asked for so far, in order.
func (b *Bucket) Puts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.puts)
}

// heldReader holds back the end of its body.
type heldReader struct {
	ctx  context.Context
	r    io.Reader
	hold time.Duration
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if err != io.EOF {
		return n, err
	}
	t := time.NewTimer(h.hold)
	defer t.Stop()
	select {
	case <-t.C:
		return n, io.EOF
	case <-h.ctx.Done():
		return n, h.ctx.Err()
	}
}
