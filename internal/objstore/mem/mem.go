// Package mem is an in-memory objstore backend for tests and dry runs.
package mem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Bucket keeps objects in a map. The zero value is not usable; call New.
type Bucket struct {
	mu      sync.Mutex
	objects map[string]object
}

type object struct {
	data    []byte
	modTime time.Time
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns an empty bucket.
func New() *Bucket { return &Bucket{objects: make(map[string]object)} }

// Put reads r whole, then stores it, so that a failed read leaves nothing.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[key]; ok && opts.IfNotExist {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExist)
	}
	b.objects[key] = object{data: data, modTime: time.Now()}
	return nil
}

func (b *Bucket) lookup(key string) (object, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return object{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[key]
	if !ok {
		return object{}, fmt.Errorf("%s: %w", key, objstore.ErrNotExist)
	}
	return o, nil
}

// Get returns a reader over the object.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.GetRange(ctx, key, 0, -1)
}

// GetRange returns a reader over part of the object.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	o, err := b.lookup(key)
	if err != nil {
		return nil, fmt.Errorf("get %w", err)
	}
	data := o.data
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	data = data[offset:]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Stat returns the object's size.
func (b *Bucket) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	o, err := b.lookup(key)
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("stat %w", err)
	}
	return objstore.Attrs{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// List reports the keys with the prefix in order.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return b.ListAfter(ctx, prefix, "", fn)
}

// ListAfter reports the keys with the prefix greater than after, in order.
func (b *Bucket) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	b.mu.Lock()
	var found []objstore.Attrs
	for k, o := range b.objects {
		if strings.HasPrefix(k, prefix) && k > after {
			found = append(found, objstore.Attrs{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	b.mu.Unlock()
	sort.Slice(found, func(i, j int) bool { return found[i].Key < found[j].Key })
	for _, a := range found {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the key.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, key)
	return nil
}

// Close does nothing.
func (b *Bucket) Close() error { return nil }
