// Package objstoretest is the conformance suite that every objstore backend
// passes: memory and local disk always, S3, GCS and Azure Blob against their
// test servers (versitygw, fake-gcs-server, Azurite) when those run.
//
// The suite checks the contract that the manifest layer rests on, not just
// the happy path: keys list in lexical order, a failed or cancelled upload
// leaves nothing visible, and create-if-absent lets exactly one of several
// racing writers win.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/retry"
)

// StreamSize is the size of the streaming upload test: large enough to take
// several parts of every cloud backend's multipart upload, small enough to
// keep the suite quick.
const StreamSize = 64 << 20

// Run runs the suite. newBucket returns an empty bucket for one subtest and
// registers its own cleanup; it is called once per subtest.
func Run(t *testing.T, newBucket func(t *testing.T) objstore.Bucket) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b objstore.Bucket)
	}{
		{"PutGet", testPutGet},
		{"GetRange", testGetRange},
		{"List", testList},
		{"ListAfter", testListAfter},
		{"Delete", testDelete},
		{"Stat", testStat},
		{"IfNotExist", testIfNotExist},
		{"IfNotExistRace", testIfNotExistRace},
		{"LostResponseCommit", testLostResponseCommit},
		{"StreamNonSeekable", testStream},
		{"CancelMidUpload", testCancel},
		{"ReaderErrorMidUpload", testReaderError},
		{"InvalidKey", testInvalidKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBucket(t)
			tc.fn(t, b)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, b objstore.Bucket, key, data string) {
	t.Helper()
	if err := b.Put(ctxFor(t), key, strings.NewReader(data), objstore.PutOptions{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func read(t *testing.T, b objstore.Bucket, key string) string {
	t.Helper()
	data, err := objstore.ReadAll(ctxFor(t), b, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(data)
}

func list(t *testing.T, b objstore.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	err := b.List(ctxFor(t), prefix, func(a objstore.Attrs) error {
		keys = append(keys, a.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return keys
}

func testPutGet(t *testing.T, b objstore.Bucket) {
	put(t, b, "a/b/c.json", `{"x":1}`)
	if got := read(t, b, "a/b/c.json"); got != `{"x":1}` {
		t.Fatalf("read back %q", got)
	}
	// An unconditional Put replaces.
	put(t, b, "a/b/c.json", `{"x":2}`)
	if got := read(t, b, "a/b/c.json"); got != `{"x":2}` {
		t.Fatalf("read back after overwrite %q", got)
	}
	// The empty object is an object.
	put(t, b, "empty", "")
	if got := read(t, b, "empty"); got != "" {
		t.Fatalf("empty object read back as %q", got)
	}
	if _, err := b.Get(ctxFor(t), "nope/absent"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("get absent: want ErrNotExist, got %v", err)
	}
}

func testGetRange(t *testing.T, b objstore.Bucket) {
	put(t, b, "r", "0123456789")
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, 3, "012"},
		{4, 2, "45"},
		{7, -1, "789"},
		{0, -1, "0123456789"},
		{8, 10, "89"},
	} {
		rc, err := b.GetRange(ctxFor(t), "r", c.off, c.n)
		if err != nil {
			t.Fatalf("range %d+%d: %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("range %d+%d: read: %v", c.off, c.n, err)
		}
		if string(got) != c.want {
			t.Errorf("range %d+%d = %q, want %q", c.off, c.n, got, c.want)
		}
	}
	if _, err := b.GetRange(ctxFor(t), "absent", 1, 2); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("range of absent: want ErrNotExist, got %v", err)
	}
}

func testList(t *testing.T, b objstore.Bucket) {
	// "a.b" < "a/b" < "a0" in byte order, while a directory walk would give
	// "a/" first: the classic trap of file-system listings.
	keys := []string{
		"m/_manifests/00000000000000000002.json",
		"m/_manifests/00000000000000000001.json",
		"m/data/r1/a1/part-00001.parquet",
		"m/data/r1/a1/part-00000.parquet",
		"m/data/r2/a1/part-00000.parquet",
		"m/data.b",
		"m/data0",
		"mo/x",
		"z",
	}
	for _, k := range keys {
		put(t, b, k, k)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	check := func(prefix string, want []string) {
		t.Helper()
		got := list(t, b, prefix)
		if !slices.Equal(got, want) {
			t.Errorf("list %q:\n got %q\nwant %q", prefix, got, want)
		}
	}
	check("", sorted)
	check("m/", sorted[:7])
	check("m/data", []string{"m/data.b", "m/data/r1/a1/part-00000.parquet", "m/data/r1/a1/part-00001.parquet",
		"m/data/r2/a1/part-00000.parquet", "m/data0"})
	check("m/data/r1/a1/part-0000", []string{"m/data/r1/a1/part-00000.parquet", "m/data/r1/a1/part-00001.parquet"})
	check("m/_manifests/", []string{"m/_manifests/00000000000000000001.json", "m/_manifests/00000000000000000002.json"})
	check("mo", []string{"mo/x"})
	check("nothing/", nil)

	// Sizes come with the listing.
	err := b.List(ctxFor(t), "z", func(a objstore.Attrs) error {
		if a.Size != 1 {
			t.Errorf("list z: size %d, want 1", a.Size)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An error from fn stops the listing and comes back.
	stop := errors.New("stop")
	n := 0
	err = b.List(ctxFor(t), "m/", func(objstore.Attrs) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("list stopped by fn: err %v after %d calls, want stop after 1", err, n)
	}
}

// testListAfter lists from each kind of start key: one that exists, one
// between keys, a directory's name with and without its slash, a key inside
// a directory, one before and one after every key. What comes back is the
// listing of the prefix without the keys up to after.
func testListAfter(t *testing.T, b objstore.Bucket) {
	keys := []string{
		"m/_manifests/00000000000000000001.json",
		"m/_manifests/00000000000000000002.checkpoint.json",
		"m/_manifests/00000000000000000002.json",
		"m/_manifests/00000000000000000003.json",
		"m/_manifests/_last_checkpoint",
		"m/_runs/r1/plan.json",
		"m/_runs/r1/ckpt-000001.json",
		"m/_runs/r2/plan.json",
		"m/_runs/r3/plan.json",
		"m/_runs/r3/sub/x.json",
		"m/_runs/r30/plan.json",
		"m/_runs/r3a",
		"m/data.b",
		"z",
	}
	for _, k := range keys {
		put(t, b, k, k)
	}
	slices.Sort(keys)
	for _, c := range []struct{ prefix, after string }{
		{"m/", ""},
		{"m/_manifests/", "m/_manifests/00000000000000000002.checkpoint.json"},
		{"m/_manifests/", "m/_manifests/00000000000000000001.json"},
		{"m/_manifests/", "m/_manifests/00000000000000000001.k"},
		{"m/_manifests/", "m/_manifests/99999999999999999999.json"},
		{"m/_manifests/", "m/_manifests/_zzz"},
		{"m/_manifests/", "a"},
		{"m/_runs/", "m/_runs/r2"},
		{"m/_runs/", "m/_runs/r1/"},
		{"m/_runs/", "m/_runs/r1/ckpt-000001.json"},
		{"m/_runs/", "m/_runs/r3/plan.json"},
		{"m/_runs/", "m/_runs/r3/"},
		{"m/_runs/", "m/_runs/r3/sub"},
		{"m/_runs/", "m/_runs/r3-"},
		{"", "m/_runs/r30/plan.json"},
		{"", "m/_runs/r3a"},
	} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, c.prefix) && k > c.after {
				want = append(want, k)
			}
		}
		var got []string
		err := b.ListAfter(ctxFor(t), c.prefix, c.after, func(a objstore.Attrs) error {
			got = append(got, a.Key)
			return nil
		})
		if err != nil {
			t.Fatalf("list %q after %q: %v", c.prefix, c.after, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("list %q after %q:\n got %q\nwant %q", c.prefix, c.after, got, want)
		}
	}
}

func testDelete(t *testing.T, b objstore.Bucket) {
	put(t, b, "d/x", "x")
	put(t, b, "d/y", "y")
	ctx := ctxFor(t)
	if err := b.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := b.Stat(ctx, "d/x"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("stat after delete: want ErrNotExist, got %v", err)
	}
	if got := list(t, b, "d/"); !slices.Equal(got, []string{"d/y"}) {
		t.Fatalf("list after delete: %q", got)
	}
	if err := b.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("delete absent: %v", err)
	}
	if err := b.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("delete never-written: %v", err)
	}
}

func testStat(t *testing.T, b objstore.Bucket) {
	put(t, b, "s/obj", "hello")
	a, err := b.Stat(ctxFor(t), "s/obj")
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	if a.Key != "s/obj" || a.Size != 5 {
		t.Errorf("stat = %+v, want key s/obj size 5", a)
	}
	if a.ModTime.IsZero() || time.Since(a.ModTime) > time.Hour || time.Until(a.ModTime) > time.Hour {
		t.Errorf("stat: implausible modification time %v", a.ModTime)
	}
	if _, err := b.Stat(ctxFor(t), "s/absent"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("stat absent: want ErrNotExist, got %v", err)
	}
	// A "directory" is not an object.
	if _, err := b.Stat(ctxFor(t), "s"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("stat of a prefix: want ErrNotExist, got %v", err)
	}
}

func testIfNotExist(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	opts := objstore.PutOptions{IfNotExist: true, ContentType: "application/json"}
	if err := b.Put(ctx, "_manifests/1.json", strings.NewReader("first"), opts); err != nil {
		t.Fatalf("first create: %v", err)
	}
	err := b.Put(ctx, "_manifests/1.json", strings.NewReader("second"), opts)
	if !errors.Is(err, objstore.ErrExist) {
		t.Fatalf("second create: want ErrExist, got %v", err)
	}
	if got := read(t, b, "_manifests/1.json"); got != "first" {
		t.Fatalf("the loser overwrote the winner: %q", got)
	}
	// A create-if-absent on a fresh key next to it still works.
	if err := b.Put(ctx, "_manifests/2.json", strings.NewReader("two"), opts); err != nil {
		t.Fatalf("create next key: %v", err)
	}
}

func testIfNotExistRace(t *testing.T, b objstore.Bucket) {
	const racers = 8
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			body := fmt.Sprintf("commit from racer %d", i)
			errs[i] = b.Put(ctx, "race/00000000000000000001.json", strings.NewReader(body),
				objstore.PutOptions{IfNotExist: true})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("racers %d and %d both won", winner, i)
			}
			winner = i
		case errors.Is(err, objstore.ErrExist):
		default:
			t.Errorf("racer %d: want nil or ErrExist, got %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer won: %v", errs)
	}
	if got, want := read(t, b, "race/00000000000000000001.json"), fmt.Sprintf("commit from racer %d", winner); got != want {
		t.Fatalf("object holds %q, but the winner wrote %q", got, want)
	}
}

// testLostResponseCommit plays the ambiguous commit: the first create
// succeeded but its answer was lost, so the writer sends it again. The
// second attempt must fail with ErrExist (never overwrite, never report
// success twice), and reading back must show our own content, which is how
// the manifest layer settles it.
func testLostResponseCommit(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	body := `{"commit_id":"6f1c","seq":7}`
	opts := objstore.PutOptions{IfNotExist: true}
	if err := b.Put(ctx, "m/_manifests/00000000000000000007.json", strings.NewReader(body), opts); err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	err := b.Put(ctx, "m/_manifests/00000000000000000007.json", strings.NewReader(body), opts)
	if !errors.Is(err, objstore.ErrExist) {
		t.Fatalf("repeated attempt: want ErrExist, got %v", err)
	}
	if got := read(t, b, "m/_manifests/00000000000000000007.json"); got != body {
		t.Fatalf("read back %q, want our own commit %q", got, body)
	}
}

// stream writes n pseudo-random bytes to w and returns their sha256.
func stream(w io.Writer, n int64, seed uint64) ([32]byte, error) {
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for n > 0 {
		chunk := buf[:min(int64(len(buf)), n)]
		rng.Read(chunk)
		h.Write(chunk)
		if _, err := w.Write(chunk); err != nil {
			return [32]byte{}, err
		}
		n -= int64(len(chunk))
	}
	return [32]byte(h.Sum(nil)), nil
}

func testStream(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	pr, pw := io.Pipe()
	var sum [32]byte
	done := make(chan error, 1)
	go func() {
		var err error
		sum, err = stream(pw, StreamSize, 1)
		pw.CloseWithError(err)
		done <- err
	}()
	// The pipe hides every optional interface (Seeker, ReaderAt, Len), so
	// the backend must stream in parts.
	if err := b.Put(ctx, "m/data/r/a/part-00000.parquet", pr, objstore.PutOptions{}); err != nil {
		pr.CloseWithError(err)
		t.Fatalf("streaming put: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	a, err := b.Stat(ctx, "m/data/r/a/part-00000.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != StreamSize {
		t.Fatalf("size %d, want %d", a.Size, StreamSize)
	}
	rc, err := b.Get(ctx, "m/data/r/a/part-00000.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if [32]byte(h.Sum(nil)) != sum {
		t.Fatal("content read back differs from what was written")
	}
}

// cancelReader hands out pseudo-random bytes and cancels its context once
// after bytes have gone out, then keeps going until total: the backend, not
// the reader, must notice.
type cancelReader struct {
	rng          *rand.ChaCha8
	left, cancel int64
	cancelFn     context.CancelFunc
}

func (r *cancelReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.left)]
	r.rng.Read(p)
	r.left -= int64(len(p))
	r.cancel -= int64(len(p))
	if r.cancel <= 0 && r.cancelFn != nil {
		r.cancelFn()
		r.cancelFn = nil
	}
	return len(p), nil
}

func assertAbsent(t *testing.T, b objstore.Bucket, key string) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := b.Stat(ctx, key); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("stat after failed upload: want ErrNotExist, got %v", err)
	}
	if got := list(t, b, ""); len(got) != 0 {
		t.Errorf("failed upload left objects behind: %q", got)
	}
}

func testCancel(t *testing.T, b objstore.Bucket) {
	for _, size := range []int64{100 << 10, 24 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx, cancel := context.WithCancel(ctxFor(t))
			defer cancel()
			key := fmt.Sprintf("cancel/%d", size)
			r := &cancelReader{rng: rand.NewChaCha8([32]byte{2}), left: size, cancel: size / 2, cancelFn: cancel}
			// io.MultiReader hides Seeker, as a pipe would.
			err := b.Put(ctx, key, io.MultiReader(r), objstore.PutOptions{})
			if err == nil {
				t.Fatal("put with a context cancelled mid-upload succeeded")
			}
			if !errors.Is(err, context.Canceled) {
				t.Logf("note: error does not wrap context.Canceled: %v", err)
			}
			assertAbsent(t, b, key)
		})
	}
}

func testReaderError(t *testing.T, b objstore.Bucket) {
	for _, size := range []int64{100 << 10, 24 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx := ctxFor(t)
			key := fmt.Sprintf("broken/%d", size)
			pr, pw := io.Pipe()
			boom := errors.New("source query failed")
			go func() {
				_, err := stream(pw, size, 3)
				if err == nil {
					err = boom
				}
				pw.CloseWithError(err)
			}()
			// A reader that fails must never be taken for the end of the
			// object: that would commit a truncated file.
			err := b.Put(ctx, key, pr, objstore.PutOptions{IfNotExist: size < 1<<20})
			pr.CloseWithError(errors.New("put returned"))
			if err == nil {
				t.Fatal("put from a failing reader succeeded")
			}
			assertAbsent(t, b, key)
		})
	}
}

func testInvalidKey(t *testing.T, b objstore.Bucket) {
	ctx := ctxFor(t)
	for _, key := range []string{"", "/abs", "a/../b", "a//b", "./a"} {
		err := b.Put(ctx, key, bytes.NewReader(nil), objstore.PutOptions{})
		if !errors.Is(err, objstore.ErrPermanent) {
			t.Errorf("put %q: want ErrPermanent, got %v", key, err)
		}
	}
}

// RunCloud runs the suite against a cloud backend twice: bare, and behind
// the retry decorator as destinations use it, since the decorator must not
// change any answer the suite checks.
func RunCloud[B objstore.Bucket](t *testing.T, newBucket func(t *testing.T) B) {
	t.Run("bare", func(t *testing.T) {
		Run(t, func(t *testing.T) objstore.Bucket { return newBucket(t) })
	})
	t.Run("retry", func(t *testing.T) {
		Run(t, func(t *testing.T) objstore.Bucket { return retry.New(newBucket(t), retry.Policy{}) })
	})
}
