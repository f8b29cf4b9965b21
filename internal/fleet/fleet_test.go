package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func tenants(n int) []Instance {
	var out []Instance
	for i := range n {
		t := fmt.Sprintf("t%d", i)
		out = append(out, Instance{Model: "orders", Tenant: &t})
	}
	return append(out, Instance{Model: "orders"}, Instance{Model: "orders", Tenant: new(string)})
}

// TestShardsPartition checks that the shards of every count take each
// instance exactly once, and that the hash is FNV-1a as documented (the
// FNV-1a 64 test vector of "a").
func TestShardsPartition(t *testing.T) {
	insts := tenants(200)
	for n := 1; n <= 7; n++ {
		taken := map[string]int{}
		for i := range n {
			s, err := ParseShard(fmt.Sprintf("%d/%d", i, n))
			if err != nil {
				t.Fatal(err)
			}
			took := 0
			for _, inst := range insts {
				if s.Has(inst) {
					taken[inst.String()]++
					took++
				}
			}
			if n > 1 && (took == 0 || took == len(insts)) {
				t.Errorf("shard %s took %d of %d instances", s, took, len(insts))
			}
		}
		for _, inst := range insts {
			if taken[inst.String()] != 1 {
				t.Fatalf("%d shards: %s taken %d times", n, inst, taken[inst.String()])
			}
		}
	}
	if h := (Instance{Model: "a"}).Hash(); h != 0xaf63dc4c8601ec8c {
		t.Fatalf("hash of model a is %#x, not FNV-1a 64", h)
	}
	for _, bad := range []string{"", "1", "2/2", "-1/3", "0/0", "a/b", "1/2/3"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("shard %q accepted", bad)
		}
	}
}

// TestRunBoundsAndIsolates runs more instances than slots: no more than
// parallel run at once, no slot runs two at once, a failure stops nothing.
func TestRunBoundsAndIsolates(t *testing.T) {
	insts := tenants(30)
	const parallel = 4
	var running, peak atomic.Int32
	var mu sync.Mutex
	busy := map[int]bool{}
	boom := errors.New("boom")
	s := Run(t.Context(), parallel, insts, func(ctx context.Context, slot, i int) (string, error) {
		mu.Lock()
		if busy[slot] || slot < 0 || slot >= parallel {
			t.Errorf("slot %d runs two instances at once", slot)
		}
		busy[slot] = true
		mu.Unlock()
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		defer func() {
			running.Add(-1)
			mu.Lock()
			busy[slot] = false
			mu.Unlock()
		}()
		if i%7 == 3 {
			return "", fmt.Errorf("instance %d: %w", i, boom)
		}
		return fmt.Sprint("ok ", i), nil
	})
	if peak.Load() > parallel {
		t.Fatalf("%d ran at once, parallel is %d", peak.Load(), parallel)
	}
	for i, o := range s.Outcomes {
		want := Done
		if i%7 == 3 {
			want = Failed
		}
		if o.Status != want || (want == Failed) != errors.Is(o.Err, boom) || o.Instance.String() != insts[i].String() {
			t.Fatalf("instance %d (%s): %s %v", i, o.Instance, o.Status, o.Err)
		}
	}
	var js map[string]any
	raw, err := json.Marshal(s)
	if err != nil || json.Unmarshal(raw, &js) != nil || js["failed"].(float64) != float64(s.Count(Failed)) || int(js["done"].(float64))+int(js["failed"].(float64)) != len(insts) {
		t.Fatalf("summary JSON %s: %v", raw, err)
	}
}

// TestRunSkipsAfterCancel: once the context ends no new instance starts;
// those not started are skipped, not failed.
func TestRunSkipsAfterCancel(t *testing.T) {
	insts := tenants(20)
	ctx, cancel := context.WithCancel(t.Context())
	var started atomic.Int32
	s := Run(ctx, 2, insts, func(ctx context.Context, slot, i int) (string, error) {
		if started.Add(1) == 3 {
			cancel()
		}
		return "", nil
	})
	if s.Count(Skipped) == 0 || s.Count(Done) != int(started.Load()) || s.Count(Failed) != 0 {
		t.Fatalf("done %d skipped %d failed %d, started %d", s.Count(Done), s.Count(Skipped), s.Count(Failed), started.Load())
	}
}
