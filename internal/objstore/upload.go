package objstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Upload streams one object to a bucket while it is written, for objects
// made by an encoder (a Parquet file) that should never be held whole in
// memory or on local disk. Bytes written go through a pipe into
// Bucket.Put, which runs in its own goroutine; the size and sha256 are
// taken on the way. Writes are gathered into chunks of uploadChunk bytes
// before they cross the pipe: an encoder writes in pieces of a few KiB,
// and each crossing is a handoff between goroutines, often between
// threads, and a system call in the store. As with Put, the object is visible only once Close has
// returned nil, and an aborted or failed upload leaves nothing behind.
//
// An Upload is used by one goroutine.
type Upload struct {
	pw     *io.PipeWriter
	buf    []byte // written, not yet passed to the pipe
	sum    hash.Hash
	n      int64
	cancel context.CancelFunc
	done   chan error // Put's result
	ended  bool       // done has been received
	err    error      // what Put returned, once ended
}

// NewUpload starts a Put of key that reads what is written to the Upload.
// Cancelling ctx aborts it.
func NewUpload(ctx context.Context, b Bucket, key string, opts PutOptions) *Upload {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	u := &Upload{pw: pw, sum: sha256.New(), cancel: cancel, done: make(chan error, 1), buf: make([]byte, 0, uploadChunk)}
	go func() {
		err := b.Put(ctx, key, pr, opts)
		// A store that gives up early must unblock the writer, and tell
		// it why.
		pr.CloseWithError(fmt.Errorf("upload %s: %w", key, cmp.Or(err, errUploadEnded)))
		u.done <- err
	}()
	return u
}

// uploadChunk is the size of the chunks that cross the pipe.
const uploadChunk = 1 << 20

var errUploadClosed = errors.New("upload already closed or aborted")

// errUploadEnded is what a Write sees if Put returned success before the
// object was complete, which only a broken backend does; Close still
// reports Put's own result.
var errUploadEnded = errors.New("the store stopped reading before the end")

// Write passes b on to the store. It fails once the upload has failed, with
// the store's error, at the latest by the write that fills the next chunk.
func (u *Upload) Write(b []byte) (int, error) {
	if u.ended {
		return 0, errors.Join(errUploadClosed, u.err)
	}
	written := 0
	for len(b) > 0 {
		k := min(len(b), cap(u.buf)-len(u.buf))
		u.buf = append(u.buf, b[:k]...)
		u.sum.Write(b[:k])
		u.n += int64(k)
		written += k
		b = b[k:]
		if len(u.buf) == cap(u.buf) {
			if err := u.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flush passes the gathered chunk to the store.
func (u *Upload) flush() error {
	_, err := u.pw.Write(u.buf)
	u.buf = u.buf[:0]
	return err
}

// Size is the number of bytes written so far.
func (u *Upload) Size() int64 { return u.n }

// Close ends the object and waits until the store holds all of it. It
// returns the object's size and the hex sha256 of its content.
func (u *Upload) Close() (size int64, sha256 string, err error) {
	if u.ended {
		return 0, "", errors.Join(errUploadClosed, u.err)
	}
	if err := u.flush(); err != nil {
		u.pw.CloseWithError(err)
	} else {
		u.pw.Close()
	}
	if err := u.wait(); err != nil {
		return 0, "", err
	}
	return u.n, hex.EncodeToString(u.sum.Sum(nil)), nil
}

// Abort stops the upload and waits until the store has let go of it; the
// store keeps nothing of it. It does nothing after Close, so that it can be
// deferred.
func (u *Upload) Abort() {
	if u.ended {
		return
	}
	u.cancel()
	u.pw.CloseWithError(context.Canceled)
	u.wait()
}

func (u *Upload) wait() error {
	u.err = <-u.done
	u.ended = true
	u.cancel()
	return u.err
}
