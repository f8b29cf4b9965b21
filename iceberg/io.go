package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// bucketIO is iceberg-go's file system over the model's objstore.Bucket, so
// that manifests are written and read through the same backends, retries
// and credentials as everything else. Names are absolute URLs under the
// table's location; root is that location and prefix the key it maps to.
//
// It writes whole objects on Close: manifests and manifest lists are small,
// and an object is visible only once complete.
type bucketIO struct {
	ctx    context.Context
	b      objstore.Bucket
	root   string // the table location, e.g. s3://bucket/lake/orders
	prefix string // the model's key, e.g. orders

	mu      sync.Mutex
	created []string // the names written, in order
}

// written returns the names written since the first n.
func (f *bucketIO) written(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created[min(n, len(f.created)):])
}

func (f *bucketIO) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.created)
}

var (
	_ iceio.WriteFileIO = (*bucketIO)(nil)
	_ iceio.ReadFileIO  = (*bucketIO)(nil)
)

// key maps an absolute name under the table's location to its object key.
func (f *bucketIO) key(name string) (string, error) {
	rel, ok := strings.CutPrefix(name, f.root+"/")
	if !ok || rel == "" {
		return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: not under the table location %s", fs.ErrInvalid, f.root)}
	}
	return f.prefix + "/" + rel, nil
}

func (f *bucketIO) ReadFile(name string) ([]byte, error) {
	k, err := f.key(name)
	if err != nil {
		return nil, err
	}
	b, err := objstore.ReadAll(f.ctx, f.b, k)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return b, err
}

func (f *bucketIO) Open(name string) (iceio.File, error) {
	b, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(b), name: name, size: int64(len(b))}, nil
}

func (f *bucketIO) Remove(name string) error {
	k, err := f.key(name)
	if err != nil {
		return err
	}
	return f.b.Delete(f.ctx, k)
}

func (f *bucketIO) WriteFile(name string, p []byte) error {
	k, err := f.key(name)
	if err != nil {
		return err
	}
	if err := f.b.Put(f.ctx, k, bytes.NewReader(p), objstore.PutOptions{}); err != nil {
		return err
	}
	f.mu.Lock()
	f.created = append(f.created, name)
	f.mu.Unlock()
	return nil
}

func (f *bucketIO) Create(name string) (iceio.FileWriter, error) {
	if _, err := f.key(name); err != nil {
		return nil, err
	}
	return &memWriter{io: f, name: name}, nil
}

// memWriter buffers a manifest and stores it on Close.
type memWriter struct {
	bytes.Buffer
	io     *bucketIO
	name   string
	closed bool
}

func (w *memWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.io.WriteFile(w.name, w.Bytes())
}

// memFile is a small object read whole.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (m *memFile) Stat() (fs.FileInfo, error) { return fileInfo{name: m.name, size: m.size}, nil }
func (m *memFile) Close() error               { return nil }

var _ io.ReaderAt = (*memFile)(nil)

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
