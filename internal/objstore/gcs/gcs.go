// Package gcs is the Google Cloud Storage backend of objstore
// (gs://bucket/prefix), built on cloud.google.com/go/storage.
//
// Credentials are Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's application-default login, or the metadata server). The SDK
// honours STORAGE_EMULATOR_HOST by itself, which is how the tests reach
// fake-gcs-server.
//
// Uploads are resumable uploads in chunks of ChunkSize bytes: memory is one
// chunk per upload, whatever the object's size. The SDK computes the
// object's CRC32C while streaming and sends it with the last chunk, so GCS
// rejects a corrupted upload. The object appears only when the upload is
// finalised; a failed source or a cancelled context aborts the session
// instead, so nothing becomes visible. Create-if-absent is the
// DoesNotExist precondition (ifGenerationMatch=0), answered 412 when the key
// is taken.
package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// DefaultChunkSize is the SDK's own default: large enough for throughput,
// and the unit in which a failed chunk is resent.
const DefaultChunkSize = 16 << 20

// Options configure a Bucket.
type Options struct {
	// ChunkSize bounds an upload's memory; 0 means DefaultChunkSize.
	ChunkSize int
}

// Bucket is a GCS bucket.
type Bucket struct {
	client *storage.Client
	bkt    *storage.BucketHandle
	name   string
	opts   Options
}

var _ objstore.Bucket = (*Bucket)(nil)

// New connects to bucket. It does not call the store: see Check.
func New(ctx context.Context, bucket string, opts Options) (*Bucket, error) {
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	client, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("create GCS client: check GOOGLE_APPLICATION_CREDENTIALS or run 'gcloud auth application-default login': %w: %w", objstore.ErrPermanent, err)
	}
	// The SDK retries only operations it deems idempotent; an upload
	// without a precondition is not, so a 503 on one chunk of a data file
	// would fail the whole file. Every key highwater writes unconditionally
	// is unique to its attempt, so resending it is safe: retry always. A
	// retried conditional write can then meet its own first attempt (412);
	// see package retry for how that is settled.
	client.SetRetry(
		storage.WithPolicy(storage.RetryAlways),
		storage.WithMaxAttempts(5),
		storage.WithBackoff(gax.Backoff{Initial: 500 * time.Millisecond, Max: 16 * time.Second, Multiplier: 2}),
	)
	return &Bucket{client: client, bkt: client.Bucket(bucket), name: bucket, opts: opts}, nil
}

// OpenURL opens gs://bucket/...; the URL takes no parameters yet. The URL's
// path is not used: the caller roots the bucket at it.
func OpenURL(ctx context.Context, u *url.URL) (*Bucket, error) {
	for k := range u.Query() {
		return nil, fmt.Errorf("gcs: unknown URL parameter %q: %w", k, objstore.ErrPermanent)
	}
	return New(ctx, u.Host, Options{})
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// Client returns the SDK client, for tests.
func (b *Bucket) Client() *storage.Client { return b.client }

// Check lists at most one object under prefix, so that a missing bucket or
// bad credentials fail before any work starts. Listing needs only
// storage.objects.list, which every role that can use the bucket has,
// unlike the bucket's attributes (storage.buckets.get).
func (b *Bucket) Check(ctx context.Context, prefix string) error {
	it := b.bkt.Objects(ctx, &storage.Query{Prefix: prefix})
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && !errors.Is(err, iterator.Done) {
		return fmt.Errorf("check bucket %s: %w", b.name, b.classify(err, false))
	}
	return nil
}

// Put streams r into a resumable upload.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	// The writer's context is ours to cancel: cancelling it is the only way
	// to abandon an upload. Close would finalise whatever was written so
	// far, which after a failed read is a truncated object.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obj := b.bkt.Object(key)
	if opts.IfNotExist {
		obj = obj.If(storage.Conditions{DoesNotExist: true})
	}
	w := obj.NewWriter(wctx)
	w.ChunkSize = b.opts.ChunkSize
	w.ContentType = opts.ContentType
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		_ = w.Close()
		return objstore.PutError(ctx, key, b.classify(err, opts.IfNotExist))
	}
	if err := ctx.Err(); err != nil {
		// Cancelled while the source reached its end: do not finalise.
		cancel()
		_ = w.Close()
		return fmt.Errorf("put %s: %w", key, context.Cause(ctx))
	}
	if err := w.Close(); err != nil {
		return objstore.PutError(ctx, key, b.classify(err, opts.IfNotExist))
	}
	return nil
}

// Get reads the whole object.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.GetRange(ctx, key, 0, -1)
}

// GetRange reads length bytes from offset, or to the end if length < 0.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	if length == 0 {
		return objstore.ReadNothing(ctx, b.Stat, key)
	}
	rc, err := b.bkt.Object(key).NewRangeReader(ctx, offset, length)
	if err != nil {
		var ge *googleapi.Error
		if offset > 0 && errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable {
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, fmt.Errorf("get %s: %w", key, b.classify(err, false))
	}
	return rc, nil
}

// Stat reads the object's metadata.
func (b *Bucket) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.Attrs{}, err
	}
	a, err := b.bkt.Object(key).Attrs(ctx)
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("stat %s: %w", key, b.classify(err, false))
	}
	return objstore.Attrs{Key: key, Size: a.Size, ModTime: a.Updated}, nil
}

// List pages through the objects under prefix. GCS lists in lexical order;
// without a delimiter the listing is recursive.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return b.ListAfter(ctx, prefix, "", fn)
}

// ListAfter is List with StartOffset, which GCS applies before it pages.
// The offset is inclusive: after itself is skipped here.
func (b *Bucket) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	q := &storage.Query{Prefix: prefix, StartOffset: after}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	it := b.bkt.Objects(ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, b.classify(err, false))
		}
		if a.Name <= after {
			continue
		}
		if err := fn(objstore.Attrs{Key: a.Name, Size: a.Size, ModTime: a.Updated}); err != nil {
			return err
		}
	}
}

// Delete removes the object; an absent key is not an error.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	if err := b.bkt.Object(key).Delete(ctx); err != nil {
		err = b.classify(err, false)
		if errors.Is(err, objstore.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// Close releases the client's connections.
func (b *Bucket) Close() error { return b.client.Close() }

// classify maps SDK errors to the objstore sentinels. conditional says the
// request carried the DoesNotExist precondition.
func (b *Bucket) classify(err error, conditional bool) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("bucket %q does not exist (check the destination URL): %w: %w", b.name, objstore.ErrPermanent, err)
	}
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("%w: %w", objstore.ErrNotExist, err)
	}
	code := 0
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		code = ge.Code
	}
	switch {
	case code == http.StatusPreconditionFailed && conditional:
		return fmt.Errorf("%w: %w", objstore.ErrExist, err)
	case code == http.StatusNotFound && strings.Contains(strings.ToLower(ge.Message), "bucket"):
		return fmt.Errorf("bucket %q does not exist (check the destination URL): %w: %w", b.name, objstore.ErrPermanent, err)
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %w", objstore.ErrNotExist, err)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("access denied to bucket %q: check GOOGLE_APPLICATION_CREDENTIALS (or 'gcloud auth application-default login') and the bucket's IAM roles: %w: %w", b.name, objstore.ErrPermanent, err)
	case code >= 400:
		return objstore.StatusError(code, err)
	}
	return err
}
