// Package objstore is the small storage interface that every destination of
// highwater implements: local disk, memory, S3, GCS and Azure Blob Storage.
//
// Keys are slash-separated and relative to the bucket (and to the prefix of
// a destination URL, see WithPrefix). Backends map their provider's errors
// to the sentinels below at the boundary; callers above only use errors.Is.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors. Backends wrap them so that errors.Is works and the
// provider's message stays in the text.
var (
	// ErrNotExist: the object (or the bucket) does not exist.
	ErrNotExist = errors.New("object does not exist")
	// ErrExist: a create-if-absent write found the key already taken.
	ErrExist = errors.New("object already exists")
	// ErrPermanent marks errors that no retry can fix: access denied,
	// bad credentials, no such bucket, invalid request.
	ErrPermanent = errors.New("permanent storage error")
	// ErrTransient marks an error that a backend knows to be worth
	// retrying, such as a 503 or a throttling answer. Backends wrap it next
	// to the provider's error: fmt.Errorf("%w: %w", objstore.ErrTransient,
	// err); the retry decorator retries it.
	ErrTransient = errors.New("transient storage error")
)

// Attrs describes a stored object.
type Attrs struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// PutOptions tune one upload.
type PutOptions struct {
	// IfNotExist makes the write create-if-absent: when the key exists the
	// write fails with ErrExist and the existing object is untouched. This
	// is the lock on which every commit of highwater rests.
	IfNotExist bool
	// ContentType is informative only.
	ContentType string
}

// Bucket is a flat key space of immutable objects.
//
// Every method takes a context; a cancelled context aborts the call. An
// object becomes visible to Get, Stat and List only once Put has returned
// nil: a failed or cancelled Put leaves nothing behind.
type Bucket interface {
	// Put stores everything read from r under key. It streams: memory use
	// is bounded by the backend's part size and concurrency, not by the
	// object's size. If r is an io.Seeker, a retry may rewind it.
	Put(ctx context.Context, key string, r io.Reader, opts PutOptions) error
	// Get opens the object for reading. ErrNotExist if absent.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// GetRange reads length bytes from offset; length < 0 reads to the end.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Stat returns the object's attributes, or ErrNotExist.
	Stat(ctx context.Context, key string) (Attrs, error)
	// List calls fn for every object whose key starts with prefix, in
	// lexical key order. An error from fn stops the listing and is returned.
	List(ctx context.Context, prefix string, fn func(Attrs) error) error
	// ListAfter is List from the first key greater than after. S3
	// (StartAfter) and GCS (StartOffset) skip the keys before it in the
	// store, so reading the tail of a long listing costs the tail only; Azure
	// Blob Storage has no such parameter for a flat listing and skips them
	// on the client.
	ListAfter(ctx context.Context, prefix, after string, fn func(Attrs) error) error
	// Delete removes the object. Deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the backend's resources.
	Close() error
}

// ReadAll reads a whole object, which should be small (a manifest).
func ReadAll(ctx context.Context, b Bucket, key string) ([]byte, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
