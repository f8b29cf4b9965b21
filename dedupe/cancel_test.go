package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/faults"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/synth"
	"github.com/highwater-dev/highwater/manifest"
)

// TestFailedUploadAbortsTheOtherBuckets fails the upload of one bucket's
// file while another bucket's upload waits for the store's answer. The
// first error must abort that upload rather than let it finish only to be
// deleted: the store never holds an object of the dedupe, and nothing is
// committed. A dedupe without the faults then completes.
func TestFailedUploadAbortsTheOtherBuckets(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	d := exportedLake(t, dir, n)
	ctx := context.Background()
	before := readState(t, d, "items")
	objects := dataObjects(t, dir)

	// Two buckets of one file each, rewritten at once by two lanes: the
	// first file opened is held, the second fails. The hold outlasts the
	// failure by far: only an upload left to finish sees it run out.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	stored := &storedPuts{Bucket: d}
	injected := errors.New("injected: connection reset by the store")
	fb := &faults.Bucket{Bucket: stored,
		Hold: func(key string) bool { return dataPart(key) == 1 }, MaxHold: time.Minute,
		Fail: func(key string) bool { return dataPart(key) == 2 }, Err: injected}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := dedupe.Run(ctx, fb, d.ObjectURL, dedupe.Options{Model: "items", Buckets: 2}); !errors.Is(err, injected) {
		t.Fatalf("want the store's error, got %v", err)
	}
	var started []int
	for _, k := range fb.Puts() {
		if p := dataPart(k); p > 0 {
			started = append(started, p)
		}
	}
	slices.Sort(started)
	if !slices.Equal(started, []int{1, 2}) {
		t.Fatalf("uploads of files %v started; want the held first and the failed second", started)
	}
	if keys := stored.data(dataPart); len(keys) != 0 {
		t.Fatalf("uploads finished after the first error: %v", keys)
	}
	if after := dataObjects(t, dir); !slices.Equal(after, objects) {
		t.Fatalf("the failed dedupe left data objects: %v, before %v", after, objects)
	}
	if st := readState(t, d, "items"); st.Seq != before.Seq {
		t.Fatalf("committed seq %d after seq %d", st.Seq, before.Seq)
	}

	res := runDedupe(t, d, dedupe.Options{Model: "items", Buckets: 2})
	if res.Commit == nil || res.OutputRows != n || res.BucketsTouched != 2 {
		t.Fatalf("dedupe after the failed one: %+v", res)
	}
}

// storedPuts records the keys whose Put stored an object.
type storedPuts struct {
	objstore.Bucket
	mu   sync.Mutex
	keys []string
}

func (b *storedPuts) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	err := b.Bucket.Put(ctx, key, r, opts)
	if err == nil {
		b.mu.Lock()
		b.keys = append(b.keys, key)
		b.mu.Unlock()
	}
	return err
}

// data returns the stored keys of data objects, as part numbers them.
func (b *storedPuts) data(part func(string) int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for _, k := range b.keys {
		if dataPart(k) > 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

// dataObjects lists the data objects of the lake at dir.
func dataObjects(t *testing.T, dir string) []string {
	t.Helper()
	var objects []string
	err := filepath.WalkDir(filepath.Join(dir, "items", "data"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects = append(objects, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// exportedLake is a lake in dir with one synthetic export of n rows of
// model items, for the tests that fault a dedupe's uploads.
func exportedLake(t *testing.T, dir string, n int) *destination.Destination {
	t.Helper()
	d := openDest(t, "file://"+dir)
	lake, err := synth.New(d, "items")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lake.Export(context.Background(), n, func(i int, r *synth.Row) {
		*r = synth.Row{ID: int64(i), UpdatedAt: t0 + int64(i), Name: fmt.Sprint("v1-", i), Price: int64(i)}
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// dataPart is the part number of a data object's key of model items, 0
// for any other key.
func dataPart(key string) int {
	_, _, n, ok := manifest.ParseDataKey(strings.TrimPrefix(key, "items/"))
	if !ok {
		return 0
	}
	return n
}
