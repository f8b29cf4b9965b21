package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
	"github.com/highwater-dev/highwater/internal/objstore/retry"
)

var fast = retry.Policy{MaxAttempts: 4, InitialDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

// faulty is a real in-memory bucket with injected failures: the next
// `fail` calls fail with err. With afterWrite, a failing Put first stores
// the object, as when the store committed and the answer was lost.
type faulty struct {
	*mem.Bucket
	fail       atomic.Int32
	err        error
	afterWrite bool
	calls      atomic.Int32
	listAfter  int // List fails after delivering this many keys
}

func (f *faulty) injected() error {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return f.err
	}
	return nil
}

func (f *faulty) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	if f.afterWrite {
		if err := f.Bucket.Put(ctx, key, r, opts); err != nil {
			f.calls.Add(1)
			return err
		}
		return f.injected()
	}
	if err := f.injected(); err != nil {
		// Consume some of the body, as a failed upload does.
		_, _ = io.CopyN(io.Discard, r, 3)
		return err
	}
	return f.Bucket.Put(ctx, key, r, opts)
}

func (f *faulty) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	if err := f.injected(); err != nil {
		return objstore.Attrs{}, err
	}
	return f.Bucket.Stat(ctx, key)
}

func (f *faulty) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return f.ListAfter(ctx, prefix, "", fn)
}

func (f *faulty) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	n := 0
	return f.Bucket.ListAfter(ctx, prefix, after, func(a objstore.Attrs) error {
		if n == f.listAfter {
			if err := f.injected(); err != nil {
				return err
			}
		}
		n++
		return fn(a)
	})
}

func newFaulty(err error, failures int32) *faulty {
	f := &faulty{Bucket: mem.New(), err: err}
	f.fail.Store(failures)
	return f
}

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return retry.New(mem.New(), fast) })
}

func TestTransientRetried(t *testing.T) {
	for _, injected := range []error{
		fmt.Errorf("put: %w", syscall.ECONNRESET),
		io.ErrUnexpectedEOF,
		fmt.Errorf("%w: 503 Slow Down", objstore.ErrTransient),
	} {
		f := newFaulty(injected, 2)
		b := retry.New(f, fast)
		if err := b.Put(t.Context(), "k", strings.NewReader("payload"), objstore.PutOptions{}); err != nil {
			t.Fatalf("%v: put: %v", injected, err)
		}
		if got, _ := objstore.ReadAll(t.Context(), f, "k"); string(got) != "payload" {
			t.Fatalf("%v: body not rewound: stored %q", injected, got)
		}
		if n := f.calls.Load(); n != 3 {
			t.Errorf("%v: %d calls, want 3", injected, n)
		}
	}
}

func TestNotRetried(t *testing.T) {
	for _, err := range []error{objstore.ErrPermanent, objstore.ErrNotExist, objstore.ErrExist, errors.New("unknown")} {
		f := newFaulty(fmt.Errorf("stat: %w", err), 3)
		_, got := retry.New(f, fast).Stat(t.Context(), "k")
		if !errors.Is(got, err) {
			t.Errorf("want %v, got %v", err, got)
		}
		if n := f.calls.Load(); n != 1 {
			t.Errorf("%v: retried (%d calls)", err, n)
		}
	}
}

func TestGiveUp(t *testing.T) {
	f := newFaulty(syscall.ECONNRESET, 100)
	_, err := retry.New(f, fast).Stat(t.Context(), "k")
	if !errors.Is(err, syscall.ECONNRESET) || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("got %v", err)
	}
}

// A stream cannot be rewound, so it is sent once.
func TestStreamNotRetried(t *testing.T) {
	f := newFaulty(syscall.ECONNRESET, 1)
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte("payload")); pw.Close() }()
	err := retry.New(f, fast).Put(t.Context(), "k", pr, objstore.PutOptions{})
	if !errors.Is(err, syscall.ECONNRESET) || f.calls.Load() != 1 {
		t.Fatalf("stream: %v after %d calls, want one failed call", err, f.calls.Load())
	}
}

func TestCancelStopsAtOnce(t *testing.T) {
	f := newFaulty(syscall.ECONNRESET, 100)
	b := retry.New(f, retry.Policy{MaxAttempts: 10, InitialDelay: time.Minute, MaxDelay: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := b.Stat(ctx, "k")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled in %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	// Already cancelled: one call at most, no waiting.
	f2 := newFaulty(syscall.ECONNRESET, 100)
	_, _ = retry.New(f2, fast).Stat(ctx, "k")
	if f2.calls.Load() > 1 {
		t.Fatalf("cancelled context: %d calls", f2.calls.Load())
	}
}

// The first attempt of a create-if-absent commits but its answer is lost;
// the retry meets our own object. The decorator reports ErrExist, and the
// caller settles it by reading back.
func TestLostResponseCreate(t *testing.T) {
	f := newFaulty(syscall.ECONNRESET, 1)
	f.afterWrite = true
	b := retry.New(f, fast)
	body := `{"commit_id":"c1"}`
	err := b.Put(t.Context(), "_manifests/1.json", strings.NewReader(body), objstore.PutOptions{IfNotExist: true})
	if !errors.Is(err, objstore.ErrExist) {
		t.Fatalf("want ErrExist, got %v", err)
	}
	got, err := objstore.ReadAll(t.Context(), b, "_manifests/1.json")
	if err != nil || string(got) != body {
		t.Fatalf("read back %q, %v; want our own commit", got, err)
	}
}

func TestListResumes(t *testing.T) {
	f := newFaulty(syscall.ECONNRESET, 1)
	f.listAfter = 2
	for _, k := range []string{"a", "b", "c", "d"} {
		f.Bucket.Put(t.Context(), k, strings.NewReader(k), objstore.PutOptions{})
	}
	var keys []string
	err := retry.New(f, fast).List(t.Context(), "", func(a objstore.Attrs) error {
		keys = append(keys, a.Key)
		return nil
	})
	if err != nil || !slices.Equal(keys, []string{"a", "b", "c", "d"}) {
		t.Fatalf("list: %q, %v", keys, err)
	}
	// An error from fn is the caller's, even if it looks transient.
	f.fail.Store(0)
	calls := 0
	err = retry.New(f, fast).List(t.Context(), "", func(objstore.Attrs) error {
		calls++
		return syscall.ECONNRESET
	})
	if !errors.Is(err, syscall.ECONNRESET) || calls != 1 {
		t.Fatalf("fn error: %v after %d calls", err, calls)
	}
}

// cutBodies serves each object's body only up to half, with a reset,
// the first time each range is read.
type cutBodies struct {
	objstore.Bucket
	cut map[int64]bool
}

type cutReader struct {
	r    io.Reader
	left int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, syscall.ECONNRESET
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

func (c *cutBodies) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := c.Bucket.GetRange(ctx, key, off, n)
	if err != nil || c.cut[off] {
		return rc, err
	}
	c.cut[off] = true
	return struct {
		io.Reader
		io.Closer
	}{&cutReader{r: rc, left: 1000}, rc}, nil
}

func TestReadResumesAfterReset(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := m.Put(ctx, "k", bytes.NewReader(data), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	b := retry.New(&cutBodies{Bucket: m, cut: map[int64]bool{}}, retry.Policy{MaxAttempts: 20, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond})
	got, err := objstore.ReadAll(ctx, b, "k")
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the object's %d", len(got), len(data))
	}
	rc, err := b.GetRange(ctx, "k", 2500, 5000)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data[2500:7500]) {
		t.Fatalf("range: %v, %d bytes", err, len(got))
	}
}
