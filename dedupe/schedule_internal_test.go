package dedupe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestScheduleClaimsEachRowGroupOnce: workers claiming the row groups of
// one file at once get each row group once. A claim that read the next
// row group after giving up the lock could hand one row group to two
// workers and none the next: its rows were lost from the dedupe.
func TestScheduleClaimsEachRowGroupOnce(t *testing.T) {
	const groups = 1 << 18
	o := &opened{firsts: make([]int64, groups), left: groups}
	s := &schedule{queue: []*opened{o}}
	claimed := make([]atomic.Int32, groups)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				got, g, err := s.claim(context.Background(), nil)
				if err != nil || got == nil {
					return
				}
				claimed[g].Add(1)
			}
		})
	}
	wg.Wait()
	for g := range claimed {
		if n := claimed[g].Load(); n != 1 {
			t.Fatalf("row group %d was claimed %d times, want once", g, n)
		}
	}
}
