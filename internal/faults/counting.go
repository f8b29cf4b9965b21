package faults

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Counting wraps a real bucket and counts the requests made of it, by kind
// (put, get, stat, list, delete), and the keys its listings return: a store
// lists in pages, so a listing costs by the keys it returns. What a command
// asks of the store is stable where its duration is not, so tests of cost
// compare counts. On local disk every put is durable (written, fsynced and
// linked or renamed), so puts also count fsyncs. It also counts the reads of
// each key, for tests that a key is read once.
type Counting struct {
	objstore.Bucket

	mu   sync.Mutex
	n    map[string]int
	gets map[string]int
}

// NewCounting counts the requests made of b.
func NewCounting(b objstore.Bucket) *Counting {
	return &Counting{Bucket: b, n: map[string]int{}, gets: map[string]int{}}
}

func (c *Counting) count(op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

func (c *Counting) countGet(key string) {
	c.mu.Lock()
	c.n["get"]++
	c.gets[key]++
	c.mu.Unlock()
}

// Counts returns the counts so far, by kind ("listed keys" for the keys
// listings returned).
func (c *Counting) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// GetsByKey returns the reads so far (Get and GetRange) of each key.
func (c *Counting) GetsByKey() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.gets)
}

// Reset sets every count to zero.
func (c *Counting) Reset() {
	c.mu.Lock()
	c.n = map[string]int{}
	c.gets = map[string]int{}
	c.mu.Unlock()
}

func (c *Counting) String() string {
	n := c.Counts()
	var b strings.Builder
	for _, op := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(&b, "%s %d, ", op, n[op])
	}
	return strings.TrimSuffix(b.String(), ", ")
}

func (c *Counting) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	c.count("put")
	return c.Bucket.Put(ctx, key, r, opts)
}

func (c *Counting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.countGet(key)
	return c.Bucket.Get(ctx, key)
}

func (c *Counting) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.countGet(key)
	return c.Bucket.GetRange(ctx, key, offset, length)
}

func (c *Counting) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	c.count("stat")
	return c.Bucket.Stat(ctx, key)
}

func (c *Counting) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return c.ListAfter(ctx, prefix, "", fn)
}

func (c *Counting) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	c.count("list")
	return c.Bucket.ListAfter(ctx, prefix, after, func(a objstore.Attrs) error {
		c.count("listed keys")
		return fn(a)
	})
}

func (c *Counting) Delete(ctx context.Context, key string) error {
	c.count("delete")
	return c.Bucket.Delete(ctx, key)
}
