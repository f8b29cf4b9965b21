// Package file is the local-disk backend of objstore, and highwater's
// default destination (file:///path).
//
// An object is written to a temporary file in its final directory, synced,
// and only then given its name, so a reader never sees half an object.
// Create-if-absent uses link(2), which fails when the name exists; the
// directory is synced after every new name so that a commit survives a power
// loss.
//
// Files and directories are created with the permissions the process's umask
// allows (0666 and 0777 masked), as cp or a shell redirect would, so that a
// reader running as another user (Spark, a BI tool) can read the lake when the
// umask lets it.
package file

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// tempPrefix names files that are not objects yet. List never shows them.
const tempPrefix = ".hw-tmp-"

// Modes before the umask. The kernel applies the umask when it creates the
// file or directory; reading the umask ourselves would be racy (umask(2) can
// only be read by setting it) in a multi-threaded process.
const (
	fileMode = 0o666
	dirMode  = 0o777
)

// Bucket stores objects as files below a root directory.
type Bucket struct {
	root string
}

var _ objstore.Bucket = (*Bucket)(nil)

// New returns a bucket rooted at dir. It creates nothing: dir and the
// directories below it are made by the first Put, so that a command that
// only reads (status, files, verify) leaves no trace of a mistyped path. A
// dir that cannot become a directory (a file is in the way) is refused
// here, before any work starts.
func New(dir string) (*Bucket, error) {
	if dir == "" {
		return nil, fmt.Errorf("file destination: empty path: %w", objstore.ErrPermanent)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file destination %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Either abs or a parent is missing: the first Put makes them.
	case err != nil:
		return nil, fmt.Errorf("open directory %s: %w", abs, classify(err))
	case !fi.IsDir():
		return nil, fmt.Errorf("open directory %s: not a directory: %w", abs, objstore.ErrPermanent)
	}
	return &Bucket{root: abs}, nil
}

func (b *Bucket) path(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
}

// Put writes r to a temporary file, syncs it, then names it.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) (err error) {
	dst, err := b.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(dst)
	var tmp *os.File
	// A Delete elsewhere removes directories it leaves empty, so the one
	// just made may be gone before the temporary file lands in it: make it
	// again once. Once the file is in it, the directory is not empty.
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return fmt.Errorf("put %s: %w", key, classify(err))
		}
		if tmp, err = createTemp(dir); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt > 0 {
			return fmt.Errorf("put %s: %w", key, classify(err))
		}
	}
	defer func() {
		// The temporary name goes in every case: after link it is a second
		// name of the object, after a failure it is garbage.
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	// One system call per chunk of copyBuffer bytes rather than per 32 KiB,
	// which os.File's own ReadFrom copies a pipe in.
	if _, err := io.CopyBuffer(&writeback{f: tmp}, ctxReader{ctx, r}, make([]byte, copyBuffer)); err != nil {
		return fmt.Errorf("put %s: %w", key, classify(err))
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("put %s: sync: %w", key, classify(err))
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, classify(err))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if opts.IfNotExist {
		if err := os.Link(tmp.Name(), dst); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("put %s: %w", key, objstore.ErrExist)
			}
			return fmt.Errorf("put %s: %w", key, classify(err))
		}
	} else if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("put %s: %w", key, classify(err))
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("put %s: sync directory: %w", key, classify(err))
	}
	return nil
}

// createTemp creates a new temporary file in dir. Unlike os.CreateTemp,
// which always makes 0600, it passes fileMode so that the object ends up with
// the permissions the umask allows: the file keeps its mode when it is
// renamed or linked to its final name.
func createTemp(dir string) (*os.File, error) {
	var rnd [12]byte
	for try := 0; ; try++ {
		rand.Read(rnd[:])
		name := filepath.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if errors.Is(err, fs.ErrExist) && try < 10 {
			continue
		}
		return f, err
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Get opens the file for reading.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.GetRange(ctx, key, 0, -1)
}

// GetRange opens the file at offset, limited to length bytes.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, classify(err))
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("get %s: %w", key, err)
		}
	}
	if length < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, length), f}, nil
}

// Stat returns the file's size and modification time.
func (b *Bucket) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	p, err := b.path(key)
	if err != nil {
		return objstore.Attrs{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("stat %s: %w", key, classify(err))
	}
	if fi.IsDir() {
		return objstore.Attrs{}, fmt.Errorf("stat %s: is a directory: %w", key, objstore.ErrNotExist)
	}
	return objstore.Attrs{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// List walks the directory that holds prefix and reports matching files in
// key order. Key order is not walk order ("a.b" sorts before "a/b"), so the
// keys are sorted before fn sees them.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return b.ListAfter(ctx, prefix, "", fn)
}

// ListAfter is List from the first key greater than after. A directory
// whose keys all sort before after is not entered, so listing the newest
// runs does not open the directory of every old one.
func (b *Bucket) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	start := b.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(b.root, filepath.FromSlash(prefix[:i]))
	}
	var found []objstore.Attrs
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(b.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			// Every key below dir/ sorts before after when dir/ does and
			// after does not start with it: they differ within dir/.
			if dir := key + "/"; p != start && dir < after && !strings.HasPrefix(after, dir) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), tempPrefix) || !strings.HasPrefix(key, prefix) || key <= after {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while we walked
			}
			return err
		}
		found = append(found, objstore.Attrs{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, classify(err))
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Key < found[j].Key })
	for _, a := range found {
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the file and the directories it leaves empty.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, classify(err))
	}
	for dir := path.Dir(key); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if os.Remove(filepath.Join(b.root, filepath.FromSlash(dir))) != nil {
			break // not empty, or gone: either way stop climbing
		}
	}
	return nil
}

// Close does nothing: a directory holds no resources.
func (b *Bucket) Close() error { return nil }

func classify(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", objstore.ErrNotExist, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOTDIR):
		// A file where a directory must be stays there on a retry.
		return fmt.Errorf("%w: %w", objstore.ErrPermanent, err)
	}
	return err
}

// copyBuffer is the size of the writes that Put makes.
const copyBuffer = 1 << 20

// writebackChunk is how many bytes written make writeback start them.
const writebackChunk = 2 << 20

// writeback writes to a file and has the kernel start writing each
// writebackChunk to disk once it is complete, so that the Sync that ends
// Put waits for the last chunk, not for the whole object: the sync of a
// 60 MB Parquet file took a tenth of a second, all of it after the last
// byte, while the export that writes it waits for its checkpoint. As a
// plain writer it also hides the file's ReadFrom, so that io.CopyBuffer
// uses its buffer.
type writeback struct {
	f       *os.File
	written int64
	started int64 // the bytes before this offset are written back or being
}

func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.started >= writebackChunk {
		// A hint: the Sync after the copy reports any error of writing
		// these bytes back, and waits for them.
		startWriteback(w.f, w.started, w.written-w.started)
		w.started = w.written
	}
	return n, err
}

// ctxReader stops a long copy when the context is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
