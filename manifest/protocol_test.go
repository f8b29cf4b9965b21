package manifest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

// Racing writers each append through Append: every one lands exactly once,
// at a gapless seq, and each build saw the state its commit was written on.
func TestAppendRacers(t *testing.T) {
	ctx := context.Background()
	l := NewLog(mem.New(), "m")
	const writers = 8
	var builds atomic.Int64
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := NewLog(l.Bucket(), "m").Append(ctx, func(st *State) (*Commit, error) {
				builds.Add(1)
				c := exportCommit(i + 1)
				c.Kind = KindBackfill // watermark left alone, so every writer rebases
				c.Watermark = st.Watermark
				return c, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err := l.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Seq != writers || len(st.Files) != writers || len(st.Runs) != writers {
		t.Fatalf("seq %d, %d files, %d runs: want %d of each", st.Seq, len(st.Files), len(st.Runs), writers)
	}
	if builds.Load() < writers {
		t.Fatalf("%d builds for %d commits", builds.Load(), writers)
	}
}

// An error of build stops Append, unwrapped, and commits nothing.
func TestAppendBuildError(t *testing.T) {
	ctx := context.Background()
	l := NewLog(mem.New(), "m")
	stop := errors.New("stop")
	if _, _, err := l.Append(ctx, func(*State) (*Commit, error) { return nil, stop }); err != stop {
		t.Fatalf("got %v, want the build's error", err)
	}
	if st, err := l.ReadState(ctx); err != nil || st.Seq != 0 {
		t.Fatalf("seq %d, %v: want an empty log", st.Seq, err)
	}
}

func TestLive(t *testing.T) {
	ctx := context.Background()
	l := NewLog(mem.New(), "m")
	appendC := func(c *Commit) {
		t.Helper()
		if _, _, err := l.Append(ctx, func(*State) (*Commit, error) { return c, nil }); err != nil {
			t.Fatal(err)
		}
	}
	appendC(exportCommit(1))                                  // seq 1
	appendC(&Commit{Kind: KindBackfill, RunID: "backfill-1"}) // seq 2
	appendC(&Commit{Kind: KindVacuum, Abandoned: []string{"dead"}})
	appendC(&Commit{Kind: KindDedupe, RunID: "dedupe-1", Removed: []string{"data/run-001/a/part-000001.parquet"}}) // seq 4
	appendC(exportCommit(5))                                                                                       // seq 5
	st, err := l.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plan Plan
		want error
	}{
		{Plan{RunID: "new-export", Kind: KindExport, BaseSeq: 5}, nil},
		{Plan{RunID: "old-export", Kind: KindExport, BaseSeq: 4}, ErrSuperseded},  // seq 5 moved the watermark
		{Plan{RunID: "full", Kind: KindFullRefresh, BaseSeq: 1}, ErrSuperseded},   // likewise
		{Plan{RunID: "dedupe-2", Kind: KindDedupe, BaseSeq: 4}, nil},              // exports only add files
		{Plan{RunID: "dedupe-3", Kind: KindDedupe, BaseSeq: 3}, ErrSuperseded},    // seq 4 removed files
		{Plan{RunID: "backfill-2", Kind: KindBackfill, BaseSeq: 1}, nil},          // no full refresh since
		{Plan{RunID: "dead", Kind: KindExport, BaseSeq: 5}, ErrAbandoned},         // a vacuum declared it
		{Plan{RunID: "backfill-1", Kind: KindBackfill, BaseSeq: 1}, ErrCommitted}, // committed at seq 2
		{Plan{RunID: "run-005", Kind: KindExport, BaseSeq: 4}, ErrCommitted},      // its own commit
	} {
		err := l.Live(ctx, st, &tc.plan)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s planned on %d: %v, want %v", tc.plan.RunID, tc.plan.BaseSeq, err, tc.want)
		}
	}
}
