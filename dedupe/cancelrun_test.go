package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/faults"
	"github.com/highwater-dev/highwater/internal/synth"
	"github.com/highwater-dev/highwater/manifest"
)

// TestCanceledDedupeLeavesNothing cancels a dedupe while two buckets'
// uploads wait for the store, as an interrupt does: it returns the
// cancellation, the store keeps no object of it, nothing is committed,
// and none of its goroutines outlives it.
func TestCanceledDedupeLeavesNothing(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
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
	before := readState(t, d, "items")
	objects := dataObjects(t, dir)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	stored := &storedPuts{Bucket: d}
	part := func(key string) int {
		_, _, n, ok := manifest.ParseDataKey(strings.TrimPrefix(key, "items/"))
		if !ok {
			return 0
		}
		return n
	}
	fb := &faults.Bucket{Bucket: stored, Hold: func(key string) bool { return part(key) > 0 }, MaxHold: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// The plan and both buckets' first files.
		for len(fb.Puts()) < 3 {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	g0 := runtime.NumGoroutine()
	_, err = dedupe.Run(ctx, fb, d.ObjectURL, dedupe.Options{Model: "items", Buckets: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
	if keys := stored.data(part); len(keys) != 0 {
		t.Fatalf("uploads finished after the cancel: %v", keys)
	}
	if after := dataObjects(t, dir); !slices.Equal(after, objects) {
		t.Fatalf("the canceled dedupe left data objects: %v, before %v", after, objects)
	}
	if st := readState(t, d, "items"); st.Seq != before.Seq {
		t.Fatalf("committed seq %d after seq %d", st.Seq, before.Seq)
	}
	for range 50 {
		if runtime.NumGoroutine() <= g0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if runtime.NumGoroutine() > g0 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d after, %d before:\n%s", runtime.NumGoroutine(), g0, buf[:runtime.Stack(buf, true)])
	}
}
