package objstore

import (
	"context"
	"io"
	"strings"
)

// WithPrefix returns a bucket whose keys are relative to prefix, which is
// how a destination URL's path becomes the root of a lake.
func WithPrefix(b Bucket, prefix string) Bucket {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return b
	}
	return &prefixed{b: b, prefix: prefix + "/"}
}

type prefixed struct {
	b      Bucket
	prefix string
}

func (p *prefixed) Put(ctx context.Context, key string, r io.Reader, opts PutOptions) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	return p.b.Put(ctx, p.prefix+key, r, opts)
}

func (p *prefixed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return p.b.Get(ctx, p.prefix+key)
}

func (p *prefixed) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return p.b.GetRange(ctx, p.prefix+key, offset, length)
}

func (p *prefixed) Stat(ctx context.Context, key string) (Attrs, error) {
	a, err := p.b.Stat(ctx, p.prefix+key)
	a.Key = strings.TrimPrefix(a.Key, p.prefix)
	return a, err
}

func (p *prefixed) List(ctx context.Context, prefix string, fn func(Attrs) error) error {
	return p.b.List(ctx, p.prefix+prefix, func(a Attrs) error {
		a.Key = strings.TrimPrefix(a.Key, p.prefix)
		return fn(a)
	})
}

func (p *prefixed) ListAfter(ctx context.Context, prefix, after string, fn func(Attrs) error) error {
	if after != "" {
		after = p.prefix + after
	}
	return p.b.ListAfter(ctx, p.prefix+prefix, after, func(a Attrs) error {
		a.Key = strings.TrimPrefix(a.Key, p.prefix)
		return fn(a)
	})
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	return p.b.Delete(ctx, p.prefix+key)
}

func (p *prefixed) Close() error { return p.b.Close() }
