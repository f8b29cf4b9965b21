// Package retry is an objstore.Bucket decorator that retries transient
// failures, so that no backend carries its own retry loop and every backend
// fails over the same way.
//
// What is retried: errors that a backend marked with objstore.ErrTransient
// (HTTP 5xx, 408, 429, throttling codes), connection resets and refusals,
// broken pipes, network timeouts and io.ErrUnexpectedEOF. Everything else is returned at
// once; in particular objstore.ErrPermanent, objstore.ErrNotExist and
// objstore.ErrExist are never retried, and a cancelled or expired context
// stops the loop immediately, also in the middle of a back-off.
//
// Put is retried only when its body is an io.Seeker: the body is rewound to
// where it started before each attempt. A plain stream is sent once; the
// cloud SDKs below already retry single parts/blocks/chunks of a multipart
// upload from their own buffers, which is where a long upload's transient
// failures happen.
//
// # Ambiguous create-if-absent
//
// A Put with IfNotExist whose first attempt reached the store but whose answer
// was lost (timeout, reset) is retried, and the retry then fails with
// objstore.ErrExist although the object there is our own. The SDKs' internal
// retries produce the same outcome (a 412 or 409 after a retried request).
// This decorator does not try to tell the two cases apart: it returns that
// ErrExist as it is. The caller (the manifest layer) settles it by reading the
// object back and comparing it with what it wrote, e.g. by the commit id
// inside; only the caller knows what "ours" means.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// errStopped ends a List whose callback failed; it is never transient.
var errStopped = errors.New("listing stopped by its callback")

// Policy says how often and how patiently to retry.
type Policy struct {
	// MaxAttempts counts the first attempt too; 1 disables retries.
	MaxAttempts int
	// InitialDelay is the upper bound of the first back-off; each further
	// back-off doubles it, up to MaxDelay. The actual wait is drawn
	// uniformly from [0, bound) ("full jitter"), so that many writers that
	// failed together do not come back together.
	InitialDelay time.Duration
	MaxDelay     time.Duration
}

// DefaultPolicy is used by the destinations. Five attempts with these delays
// span up to about 15 s, which rides out a store's brief unavailability
// without hiding an outage for long.
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: 5, InitialDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second}
}

// Bucket is the retrying decorator.
type Bucket struct {
	b      objstore.Bucket
	policy Policy
}

var _ objstore.Bucket = (*Bucket)(nil)

// New wraps b. Zero fields of policy take DefaultPolicy's values.
func New(b objstore.Bucket, policy Policy) *Bucket {
	def := DefaultPolicy()
	if policy.MaxAttempts <= 0 {
		policy.MaxAttempts = def.MaxAttempts
	}
	if policy.InitialDelay <= 0 {
		policy.InitialDelay = def.InitialDelay
	}
	if policy.MaxDelay <= 0 {
		policy.MaxDelay = def.MaxDelay
	}
	return &Bucket{b: b, policy: policy}
}

// Unwrap returns the decorated bucket.
func (r *Bucket) Unwrap() objstore.Bucket { return r.b }

// IsTransient reports whether err is worth another attempt.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Also when the SDK's own per-try timeout fired, that shows up as a
		// net timeout below; a context error here is the caller's.
		return false
	}
	if errors.Is(err, objstore.ErrPermanent) || errors.Is(err, objstore.ErrNotExist) || errors.Is(err, objstore.ErrExist) {
		return false
	}
	if errors.Is(err, objstore.ErrTransient) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return false
}

// do runs op under the bucket's policy.
func (r *Bucket) do(ctx context.Context, before func() error, op func() error) error {
	return do(ctx, r.policy, before, op)
}

// Do runs op until it succeeds, fails with an error that IsTransient
// rejects, the attempts of p run out, or ctx is done. It serves calls that
// are not Bucket methods, such as a destination's check at open.
func Do(ctx context.Context, p Policy, op func() error) error {
	return do(ctx, New(nil, p).policy, nil, op)
}

// do is the loop. before, when set, runs ahead of every attempt after the
// first and may veto the retry by returning an error.
func do(ctx context.Context, p Policy, before func() error, op func() error) error {
	bound := p.InitialDelay
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || !IsTransient(err) || attempt >= p.MaxAttempts {
			if err != nil && attempt > 1 {
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(rand.N(bound) + 1)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retry abandoned: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		bound = min(2*bound, p.MaxDelay)
		if before != nil {
			if berr := before(); berr != nil {
				return fmt.Errorf("%w (cannot retry: %w)", err, berr)
			}
		}
	}
}

// Put retries only a seekable body, rewound to its starting offset before
// each attempt. See the package comment for create-if-absent.
func (r *Bucket) Put(ctx context.Context, key string, body io.Reader, opts objstore.PutOptions) error {
	seeker, ok := body.(io.Seeker)
	if !ok {
		return r.b.Put(ctx, key, body, opts)
	}
	start, err := seeker.Seek(0, io.SeekCurrent)
	if err != nil {
		// A Seeker that cannot tell its position (a pipe behind *os.File)
		// is a stream: send it once.
		return r.b.Put(ctx, key, body, opts)
	}
	rewind := func() error {
		_, err := seeker.Seek(start, io.SeekStart)
		return err
	}
	return r.do(ctx, rewind, func() error { return r.b.Put(ctx, key, body, opts) })
}

// Get retries opening the object, and the reader it returns resumes a read
// that fails part-way with a ranged read from the byte it reached.
func (r *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return r.GetRange(ctx, key, 0, -1)
}

// GetRange retries opening the range, and resumes it like Get.
func (r *Bucket) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.do(ctx, nil, func() (err error) {
		rc, err = r.b.GetRange(ctx, key, offset, length)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &resumingReader{r: r, ctx: ctx, key: key, off: offset, left: length, rc: rc}, nil
}

// resumingReader reopens its range after a transient read error, such as a
// connection reset in the middle of a body, so that callers see one whole
// object. The object is immutable, so the rest of it is the same bytes.
type resumingReader struct {
	r    *Bucket
	ctx  context.Context
	key  string
	off  int64 // where the next byte comes from
	left int64 // bytes still to read; < 0: to the end
	rc   io.ReadCloser
}

func (rr *resumingReader) Read(p []byte) (int, error) {
	if rr.left == 0 {
		return 0, io.EOF
	}
	if rr.left > 0 && int64(len(p)) > rr.left {
		p = p[:rr.left]
	}
	for attempt := 1; ; attempt++ {
		n, err := rr.rc.Read(p)
		rr.off += int64(n)
		if rr.left > 0 {
			rr.left -= int64(n)
		}
		if err == nil || err == io.EOF || !IsTransient(err) {
			return n, err
		}
		if attempt >= rr.r.policy.MaxAttempts || rr.ctx.Err() != nil {
			return n, fmt.Errorf("read %s at byte %d: %w", rr.key, rr.off, err)
		}
		if rerr := rr.reopen(); rerr != nil {
			return n, rerr
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (rr *resumingReader) reopen() error {
	rr.rc.Close()
	return rr.r.do(rr.ctx, nil, func() (err error) {
		rr.rc, err = rr.r.b.GetRange(rr.ctx, rr.key, rr.off, rr.left)
		if err != nil {
			rr.rc = io.NopCloser(failingReader{err})
		}
		return err
	})
}

func (rr *resumingReader) Close() error { return rr.rc.Close() }

// failingReader stands in for a body that could not be reopened.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// Stat retries.
func (r *Bucket) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	var a objstore.Attrs
	err := r.do(ctx, nil, func() (err error) {
		a, err = r.b.Stat(ctx, key)
		return err
	})
	return a, err
}

// List retries a listing that failed part-way and resumes after the last
// key already given to fn, so fn never sees a key twice. An error returned
// by fn is never retried.
func (r *Bucket) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return r.ListAfter(ctx, prefix, "", fn)
}

// ListAfter retries as List does: each retry lists after the last key
// given to fn.
func (r *Bucket) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	var fnErr error
	err := r.do(ctx, nil, func() error {
		err := r.b.ListAfter(ctx, prefix, after, func(a objstore.Attrs) error {
			if a.Key <= after {
				return nil // a backend that skipped less than asked
			}
			if err := fn(a); err != nil {
				fnErr = err
				return err
			}
			after = a.Key
			return nil
		})
		if fnErr != nil {
			// fn's error may look transient (it may do I/O of its own);
			// it is still not ours to retry.
			return errStopped
		}
		return err
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// Delete retries; deleting is idempotent.
func (r *Bucket) Delete(ctx context.Context, key string) error {
	return r.do(ctx, nil, func() error { return r.b.Delete(ctx, key) })
}

// Close closes the decorated bucket.
func (r *Bucket) Close() error { return r.b.Close() }
