package export_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/faults"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
)

// TestFailedUploadCancelsTheRun fails the upload of the second file part
// way, as a store that resets the connection does. The first error must
// end the run: the read stops within the batches already in flight
// instead of paging on, no later file is started, the files before stay
// checkpointed for a resume, and nothing is committed.
func TestFailedUploadCancelsTheRun(t *testing.T) {
	// md5 digests barely compress, so the files roll near the target.
	const rows, pageRows = 60000, 1000
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, payload text)`,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 ms',
		 md5(g::text) || md5((g * 7)::text) || md5((g * 13)::text) || md5((g * 31)::text)
		 FROM generate_series(1, 60000) g`)
	opts := l.options()
	opts.TargetFileBytes = 1 << 20
	opts.RowGroupBytes = 128 << 10
	opts.PageRows = pageRows
	var pages atomic.Int64
	opts.Failpoint = func(name string) {
		if name == "after-page" {
			pages.Add(1)
		}
	}
	injected := errors.New("injected: connection reset by the store")
	fb := &faults.Bucket{After: 256 << 10, Err: injected, Fail: func(key string) bool { return l.part(key) == 2 }}

	if _, err := l.exportThrough(fb, opts); !errors.Is(err, injected) {
		t.Fatalf("want the store's error, got %v", err)
	}
	// Six batches of 1024 rows exist; past them the read can only go on
	// by paging while nobody writes.
	n, total := pages.Load(), int64(rows/pageRows)
	t.Logf("read %d of %d pages", n, total)
	if n >= total/2 {
		t.Fatalf("the read went on for %d of %d pages after the upload failed", n, total)
	}
	var data []string
	for _, k := range fb.Puts() {
		if l.part(k) > 0 {
			data = append(data, k)
		}
	}
	if len(data) != 2 || l.part(data[0]) != 1 || l.part(data[1]) != 2 {
		t.Fatalf("uploads started: %v; want the first file and the failed second only", data)
	}
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("committed seq %d", st.Seq)
	}
	if ckpts := l.checkpoints(); len(ckpts) != 1 {
		t.Fatalf("checkpoints %v; want the first file's only", ckpts)
	}
	// The run resumes after the checkpointed file and completes.
	res := l.mustExport(l.options())
	if !res.Resumed || res.Commit.Metrics.RowsTransferred != rows {
		t.Fatalf("resumed %v, %d rows", res.Resumed, res.Commit.Metrics.RowsTransferred)
	}
}

// TestFailedReadAbortsTheUpload fails the read (a key that appears twice)
// while the first file's upload waits for the store's answer. The first
// error must abort that upload rather than let it finish: no object and
// no checkpoint is left, and nothing is committed.
func TestFailedReadAbortsTheUpload(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 ms', 'x', 1 FROM generate_series(1, 3000) g`)
	opts := l.options()
	opts.PageRows = 500
	opts.TargetFileBytes = 1 // a file a batch
	opts.Source = pgsource.Spec{Query: `SELECT * FROM items UNION ALL SELECT * FROM items WHERE id = 3000`,
		PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
	// The hold outlasts the read by far: the read fails within a few
	// pages, and only an upload left to finish sees the hold run out.
	fb := &faults.Bucket{Hold: func(key string) bool { return l.part(key) == 1 }, MaxHold: time.Minute}
	if _, err := l.exportThrough(fb, opts); !errors.Is(err, pgsource.ErrDuplicateKey) {
		t.Fatalf("want ErrDuplicateKey, got %v", err)
	}
	if ckpts := l.checkpoints(); len(ckpts) != 0 {
		t.Fatalf("the failed read left checkpointed files: %v", ckpts)
	}
	var objects []string
	filepath.WalkDir(filepath.Join(l.dir, l.model, "data"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects = append(objects, p)
		}
		return nil
	})
	if len(objects) != 0 {
		t.Fatalf("the failed read left data objects: %v", objects)
	}
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("committed seq %d", st.Seq)
	}
}

// part is the file number of a data object's key, or 0 for another key.
func (l *lake) part(key string) int {
	_, _, n, ok := manifest.ParseDataKey(strings.TrimPrefix(key, l.model+"/"))
	if !ok {
		return 0
	}
	return n
}

// checkpoints lists the file checkpoints under the lake.
func (l *lake) checkpoints() []string {
	var ckpts []string
	filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "ckpt-") {
			ckpts = append(ckpts, p)
		}
		return nil
	})
	return ckpts
}
