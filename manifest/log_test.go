package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

func wm(s string) *string { return &s }

func exportCommit(n int) *Commit {
	return &Commit{Kind: KindExport, RunID: fmt.Sprintf("run-%03d", n), Watermark: wm(fmt.Sprintf("2026-01-01 00:00:%02d.000000+00", n%60)),
		Added: []File{{Key: fmt.Sprintf("data/run-%03d/a/part-000001.parquet", n), Rows: int64(n)}}}
}

func TestStateCheckpointsEveryN(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	l := NewLog(b, "m")
	st := &State{}
	for i := 1; i <= 120; i++ {
		c := exportCommit(i)
		if i == 60 {
			c = &Commit{Kind: KindDedupe, RunID: "dedupe", Removed: []string{"data/run-001/a/part-000001.parquet"}, Watermark: st.Watermark}
		}
		if err := l.Commit(ctx, st, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []int64{50, 100} {
		if _, err := b.Stat(ctx, fmt.Sprintf("m/_manifests/%020d.checkpoint.json", seq)); err != nil {
			t.Fatalf("no state checkpoint at %d: %v", seq, err)
		}
	}
	// A reader starting from the checkpoint folds the same state as the
	// writer did commit by commit.
	got, err := NewLog(b, "m").ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 120 || len(got.Files) != len(st.Files) || len(got.Files) != 118 || *got.Watermark != *st.Watermark || got.LastWatermarkSeq != 120 {
		t.Fatalf("read state seq %d files %d watermark %v", got.Seq, len(got.Files), *got.Watermark)
	}
	// Without the hint, the newest checkpoint is found by listing.
	b.Delete(ctx, "m/_manifests/_last_checkpoint")
	if got, err = NewLog(b, "m").ReadState(ctx); err != nil || got.Seq != 120 || len(got.Files) != 118 {
		t.Fatalf("without hint: %v %+v", err, got)
	}
}

func TestCommitRaceExactlyOneWins(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = NewLog(b, "m").Commit(ctx, &State{}, exportCommit(i))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Fatalf("loser got %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won seq 1", won)
	}
}

// lostResponse performs a Put and then reports a failure, as a store whose
// answer was lost in the network would.
type lostResponse struct {
	objstore.Bucket
	once sync.Once
}

func (l *lostResponse) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	err := l.Bucket.Put(ctx, key, r, opts)
	if err == nil && strings.HasSuffix(key, "00000000000000000001.json") {
		lost := false
		l.once.Do(func() { lost = true })
		if lost {
			return errors.New("connection reset by peer")
		}
	}
	return err
}

func TestAmbiguousCommitIsSettledByReadingBack(t *testing.T) {
	ctx := context.Background()
	b := &lostResponse{Bucket: mem.New()}
	l := NewLog(b, "m")
	st := &State{}
	if err := l.Commit(ctx, st, exportCommit(1)); err != nil {
		t.Fatalf("a commit whose answer was lost but which landed: %v", err)
	}
	if st.Seq != 1 {
		t.Fatalf("state seq %d", st.Seq)
	}
	// Another writer's commit at the seq is a conflict, not a success.
	if err := NewLog(b, "m").Commit(ctx, &State{}, exportCommit(2)); !errors.Is(err, ErrConflict) {
		t.Fatalf("want ErrConflict, got %v", err)
	}
}

// ignoresPrecondition is a store that overwrites on create-if-absent.
type ignoresPrecondition struct{ objstore.Bucket }

func (i ignoresPrecondition) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	opts.IfNotExist = false
	return i.Bucket.Put(ctx, key, r, opts)
}

func TestProbeRefusesStoreIgnoringCreateIfAbsent(t *testing.T) {
	ctx := context.Background()
	b := ignoresPrecondition{mem.New()}
	err := NewLog(b, "m").Commit(ctx, &State{}, exportCommit(1))
	if !errors.Is(err, ErrUnsafeStore) {
		t.Fatalf("want ErrUnsafeStore, got %v", err)
	}
	n := 0
	b.List(ctx, "", func(a objstore.Attrs) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d objects left behind", n)
	}
}

func TestCheckpointChainAdmitsOneAttempt(t *testing.T) {
	ctx := context.Background()
	l := NewLog(mem.New(), "m")
	ck := func(attempt string, n int) *FileCheckpoint {
		return &FileCheckpoint{RunID: "r", AttemptID: attempt, N: n, File: File{Key: DataKey("r", attempt, n)}}
	}
	for _, c := range []*FileCheckpoint{ck("a", 1), ck("a", 2)} {
		if err := l.WriteFileCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WriteFileCheckpoint(ctx, ck("b", 2)); !errors.Is(err, ErrChainTaken) {
		t.Fatalf("a twin extended the chain: %v", err)
	}
	if err := l.WriteFileCheckpoint(ctx, ck("a", 2)); err != nil {
		t.Fatalf("a retry of our own checkpoint: %v", err)
	}
	chain, err := l.ReadChain(ctx, "r")
	if err != nil || len(chain) != 2 || chain[1].Prev != "ckpt-000001.json" || chain[1].AttemptID != "a" {
		t.Fatalf("chain %v %+v", err, chain)
	}
}

func TestNewerFormatIsRefused(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	b.Put(ctx, "m/_manifests/00000000000000000001.json", strings.NewReader(`{"format_version": 9, "min_reader_version": 9, "seq": 1}`), objstore.PutOptions{})
	_, err := NewLog(b, "m").ReadState(ctx)
	if err == nil || !strings.Contains(err.Error(), "upgrade highwater") {
		t.Fatalf("want an upgrade error, got %v", err)
	}
}

// retriedAfterLoss lands every create-if-absent write, then answers as an
// SDK whose retry met that first write would: with ErrExist.
type retriedAfterLoss struct{ objstore.Bucket }

func (r retriedAfterLoss) Put(ctx context.Context, key string, body io.Reader, opts objstore.PutOptions) error {
	data, _ := io.ReadAll(body)
	if err := r.Bucket.Put(ctx, key, strings.NewReader(string(data)), opts); err != nil || !opts.IfNotExist {
		return err
	}
	return r.Bucket.Put(ctx, key, strings.NewReader(string(data)), opts)
}

func TestOwnWritesAreRecognisedAfterALostAnswer(t *testing.T) {
	ctx := context.Background()
	b := retriedAfterLoss{mem.New()}
	l := NewLog(b, "m")
	if err := l.WritePlan(ctx, &Plan{RunID: "r1", Kind: KindExport}); err != nil {
		t.Fatalf("plan: %v", err)
	}
	if err := l.WriteFileCheckpoint(ctx, &FileCheckpoint{RunID: "r1", AttemptID: "a", N: 1, File: File{Key: "data/r1/a/part-000001.parquet"}}); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	// The probe's first write and the commit meet their own writes too.
	st := &State{}
	if err := l.Commit(ctx, st, exportCommit(1)); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Another run's plan at the same key is not ours.
	if err := l.WritePlan(ctx, &Plan{RunID: "r1", Kind: KindBackfill}); !errors.Is(err, objstore.ErrExist) {
		t.Fatalf("a different plan at a taken key: %v", err)
	}
}
