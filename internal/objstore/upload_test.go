package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/file"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

// eachBackend runs fn against a fresh bucket of every backend that needs
// no server.
func eachBackend(t *testing.T, fn func(t *testing.T, b objstore.Bucket)) {
	t.Run("mem", func(t *testing.T) { fn(t, mem.New()) })
	t.Run("file", func(t *testing.T) {
		b, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, b)
	})
}

// writeChunks writes n pseudo-random bytes in chunks of varying size and
// returns them.
func writeChunks(t *testing.T, w io.Writer, n int, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for rest := data; len(rest) > 0; {
		k := min(len(rest), 1+rng.IntN(200<<10))
		if _, err := w.Write(rest[:k]); err != nil {
			t.Fatalf("write: %v", err)
		}
		rest = rest[k:]
	}
	return data
}

func assertNothingStored(t *testing.T, b objstore.Bucket) {
	t.Helper()
	var keys []string
	if err := b.List(context.Background(), "", func(a objstore.Attrs) error {
		keys = append(keys, a.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("the store kept %q", keys)
	}
}

func TestUploadClose(t *testing.T) {
	eachBackend(t, func(t *testing.T, b objstore.Bucket) {
		ctx := context.Background()
		for _, n := range []int{0, 1, 3<<20 + 17} {
			key := "m/data/r/a/part-" + strings.Repeat("x", n%7) + ".parquet"
			u := objstore.NewUpload(ctx, b, key, objstore.PutOptions{})
			data := writeChunks(t, u, n, uint64(n))
			if u.Size() != int64(n) {
				t.Errorf("Size before Close = %d, want %d", u.Size(), n)
			}
			size, sum, err := u.Close()
			if err != nil {
				t.Fatalf("close: %v", err)
			}
			want := sha256.Sum256(data)
			if size != int64(n) || sum != hex.EncodeToString(want[:]) {
				t.Errorf("close: size %d sha256 %s, want %d %x", size, sum, n, want)
			}
			got, err := objstore.ReadAll(ctx, b, key)
			if err != nil {
				t.Fatal(err)
			}
			if sha256.Sum256(got) != want {
				t.Errorf("stored %d bytes that differ from the %d written", len(got), n)
			}
			// Abort after Close may be deferred: it must keep the object.
			u.Abort()
			if _, err := b.Stat(ctx, key); err != nil {
				t.Errorf("stat after Close then Abort: %v", err)
			}
			if _, _, err := u.Close(); err == nil {
				t.Error("a second Close succeeded")
			}
		}
	})
}

func TestUploadAbort(t *testing.T) {
	eachBackend(t, func(t *testing.T, b objstore.Bucket) {
		u := objstore.NewUpload(context.Background(), b, "m/data/r/a/part-000001.parquet", objstore.PutOptions{})
		writeChunks(t, u, 2<<20, 1)
		u.Abort()
		u.Abort()
		if _, err := u.Write([]byte("more")); err == nil {
			t.Error("a write after Abort succeeded")
		}
		if _, _, err := u.Close(); err == nil {
			t.Error("Close after Abort succeeded")
		}
		assertNothingStored(t, b)
	})
}

// A cancelled context stops the upload wherever it is: the next writes or
// the Close fail, and nothing is stored.
func TestUploadCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b objstore.Bucket) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		u := objstore.NewUpload(ctx, b, "m/data/r/a/part-000001.parquet", objstore.PutOptions{})
		writeChunks(t, u, 1<<20, 2)
		cancel()
		var werr error
		chunk := make([]byte, 64<<10)
		for range 64 {
			if _, werr = u.Write(chunk); werr != nil {
				break
			}
		}
		_, _, err := u.Close()
		if err == nil {
			t.Fatal("Close of an upload whose context was cancelled succeeded")
		}
		for _, e := range []error{werr, err} {
			if e != nil && !errors.Is(e, context.Canceled) {
				t.Errorf("error does not say the upload was cancelled: %v", e)
			}
		}
		assertNothingStored(t, b)
	})
}

// The store's own error reaches the caller as itself, so that errors.Is
// classifies it.
func TestUploadStoreError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b objstore.Bucket) {
		ctx := context.Background()
		const key = "m/_manifests/00000000000000000001.json"
		if err := b.Put(ctx, key, strings.NewReader("ours"), objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		u := objstore.NewUpload(ctx, b, key, objstore.PutOptions{IfNotExist: true})
		writeChunks(t, u, 100, 3)
		if _, _, err := u.Close(); !errors.Is(err, objstore.ErrExist) {
			t.Fatalf("close over an existing key: want ErrExist, got %v", err)
		}
		if got, err := objstore.ReadAll(ctx, b, key); err != nil || string(got) != "ours" {
			t.Fatalf("existing object after a refused upload: %q, %v", got, err)
		}
	})
}

// readSizes is a mem bucket whose Put records the size of each read it
// makes from the upload, with a buffer larger than any chunk.
type readSizes struct {
	*mem.Bucket
	sizes []int
}

func (b *readSizes) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	var data []byte
	buf := make([]byte, 4<<20)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b.sizes = append(b.sizes, n)
			data = append(data, buf[:n]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return b.Bucket.Put(ctx, key, bytes.NewReader(data), opts)
}

// An encoder writes in pieces of a few KiB; the store reads them gathered
// into chunks of 1 MiB, each a handoff between goroutines and, for the
// file store, one system call, instead of one per piece.
func TestUploadGathersWrites(t *testing.T) {
	b := &readSizes{Bucket: mem.New()}
	u := objstore.NewUpload(context.Background(), b, "m/data/r/a/part-000001.parquet", objstore.PutOptions{})
	const n, piece = 3<<20 + 17, 32 << 10
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for rest := data; len(rest) > 0; {
		k := min(len(rest), piece)
		if _, err := u.Write(rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	if _, _, err := u.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := objstore.ReadAll(context.Background(), b, "m/data/r/a/part-000001.parquet")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes (%v), want the %d written", len(got), err, n)
	}
	for i, s := range b.sizes[:len(b.sizes)-1] {
		if s < 1<<20 {
			t.Fatalf("read %d of the store took %d bytes, want chunks of at least 1 MiB (reads: %v)", i, s, b.sizes)
		}
	}
}
