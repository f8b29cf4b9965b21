package dedupe_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/faults"
)

// TestCanceledDedupeLeavesNothing cancels a dedupe while two buckets'
// uploads wait for the store, as an interrupt does: it returns the
// cancellation, the store keeps no object of it, nothing is committed,
// and none of its goroutines outlives it.
func TestCanceledDedupeLeavesNothing(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	d := exportedLake(t, dir, n)
	before := readState(t, d, "items")
	objects := dataObjects(t, dir)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	stored := &storedPuts{Bucket: d}
	fb := &faults.Bucket{Bucket: stored, Hold: func(key string) bool { return dataPart(key) > 0 }, MaxHold: time.Minute}
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
	_, err := dedupe.Run(ctx, fb, d.ObjectURL, dedupe.Options{Model: "items", Buckets: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
	if keys := stored.data(dataPart); len(keys) != 0 {
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
