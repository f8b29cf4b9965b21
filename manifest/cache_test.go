package manifest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

// readsByName counts the reads of each name in the log's directory.
type readsByName struct {
	objstore.Bucket
	mu sync.Mutex
	n  map[string]int
}

func newReadsByName() *readsByName { return &readsByName{Bucket: mem.New(), n: map[string]int{}} }

func (r *readsByName) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if dir, name, ok := strings.Cut(key, "/_manifests/"); ok && dir == "m" {
		r.mu.Lock()
		r.n[name]++
		r.mu.Unlock()
	}
	return r.Bucket.Get(ctx, key)
}

// take returns the counts so far and starts counting afresh.
func (r *readsByName) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}

// freshState is the state a Log that has read nothing yet reads.
func freshState(t *testing.T, b objstore.Bucket) *State {
	t.Helper()
	st, err := NewLog(b, "m").ReadState(context.Background())
	if err != nil {
		t.Fatalf("fresh read: %v", err)
	}
	return st
}

// TestStateReadAgainReadsOnlyTheNew: a Log reads each commit and
// checkpoint once, whether the log was listed whole (no checkpoint yet) or
// after its checkpoint, and whether what is new crosses a checkpoint; and
// what another process commits in between is always seen.
func TestStateReadAgainReadsOnlyTheNew(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		before, more int
		want         map[string]int // the reads of the second ReadState
	}{
		{5, 0, map[string]int{}},
		{5, 2, map[string]int{commitKey(6): 1, commitKey(7): 1}},
		{60, 0, map[string]int{}},
		{60, 1, map[string]int{commitKey(61): 1}},
		// Past checkpoint 100: proven (it and commit 100), then 101..103.
		{60, 43, map[string]int{checkpointKey(100): 1, commitKey(100): 1, commitKey(101): 1, commitKey(102): 1, commitKey(103): 1}},
	} {
		t.Run(fmt.Sprintf("%d+%d", tc.before, tc.more), func(t *testing.T) {
			b := newReadsByName()
			commitN(t, b, tc.before)
			l := NewLog(b, "m")
			if _, err := l.ReadState(ctx); err != nil {
				t.Fatal(err)
			}
			// Another process appends.
			other := NewLog(b, "m")
			for i := range tc.more {
				if _, _, err := other.Append(ctx, func(*State) (*Commit, error) { return exportCommit(tc.before + i + 1), nil }); err != nil {
					t.Fatal(err)
				}
			}
			b.take()
			got, err := l.ReadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reads := b.take()
			want := freshState(t, b)
			if got.Seq != int64(tc.before+tc.more) || stateDigest(got) != stateDigest(want) {
				t.Fatalf("read again: seq %d, %d files; a fresh read: seq %d, %d files", got.Seq, len(got.Files), want.Seq, len(want.Files))
			}
			if fmt.Sprint(reads) != fmt.Sprint(tc.want) {
				t.Fatalf("read again, it read %v, want %v", reads, tc.want)
			}
		})
	}
}

// TestCachedStateIsTheCallersOwn: what a caller does to a state it was
// given does not reach the next reader.
func TestCachedStateIsTheCallersOwn(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	commitN(t, b, 3)
	l := NewLog(b, "m")
	for i := range 2 {
		st, err := l.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			_, st, err = l.Append(ctx, func(st *State) (*Commit, error) { return exportCommit(4), nil })
			if err != nil {
				t.Fatal(err)
			}
		}
		st.Files[0].Key = "changed"
		st.Files = append(st.Files, File{Key: "added"})
		st.Runs["run-001"] = 99
		st.Runs["another"] = 1
		st.Identity.PrimaryKey = append(st.Identity.PrimaryKey, "k")
		*st.Watermark = "changed"
		st.Seq = 1
		got, err := l.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := freshState(t, b); stateDigest(got) != stateDigest(want) {
			t.Fatalf("after the caller changed its state, the next read gives seq %d, files %v; the log's: seq %d, files %v", got.Seq, got.Files, want.Seq, want.Files)
		}
	}
}

// TestAppendRebuildsOnALostRaceWithTheCache: a writer that loses the seq
// to another process reads the new commit, only it, and builds again on
// the state with it.
func TestAppendRebuildsOnALostRaceWithTheCache(t *testing.T) {
	ctx := context.Background()
	b := newReadsByName()
	commitN(t, b, 60)
	l := NewLog(b, "m")
	if _, err := l.ReadState(ctx); err != nil {
		t.Fatal(err)
	}
	b.take()
	var bases []int64
	c, st, err := l.Append(ctx, func(st *State) (*Commit, error) {
		bases = append(bases, st.Seq)
		if len(bases) == 1 {
			// Another process, whose reads are not counted, takes seq 61.
			if _, _, err := NewLog(b.Bucket, "m").Append(ctx, func(*State) (*Commit, error) { return exportCommit(61), nil }); err != nil {
				t.Fatal(err)
			}
		}
		return exportCommit(62), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bases) != "[60 61]" || c.Seq != 62 || st.Seq != 62 {
		t.Fatalf("built on %v, committed seq %d, state at %d; want built on 60 then 61, seq 62", bases, c.Seq, st.Seq)
	}
	// Commit reads seq 61 back to learn it lost, the fold reads it again:
	// nothing at or below the cached seq is read.
	for name := range b.take() {
		if seq, _, ok := parseLogName(name); ok && seq <= 60 {
			t.Errorf("the rebuild read %s again", name)
		}
	}
	if want := freshState(t, b); stateDigest(st) != stateDigest(want) || len(st.Files) != 62 {
		t.Fatalf("the state Append returned is not the log's: %d files, the log's %d", len(st.Files), len(want.Files))
	}
}

// TestCacheYieldsToWhatTheLogSays damages the log after a Log read it: the
// Log then reads what a Log that had read nothing would, a gap, a stray
// commit, a checkpoint doubted or a history written anew alike.
func TestCacheYieldsToWhatTheLogSays(t *testing.T) {
	ctx := context.Background()
	del := func(seqs ...int64) func(objstore.Bucket) {
		return func(b objstore.Bucket) {
			for _, seq := range seqs {
				b.Delete(ctx, "m/_manifests/"+commitKey(seq))
			}
		}
	}
	rewrite := func(from, to int) func(objstore.Bucket) {
		return func(b objstore.Bucket) {
			for seq := from; seq <= to; seq++ {
				b.Delete(ctx, "m/_manifests/"+commitKey(int64(seq)))
			}
			st := &State{}
			l := NewLog(b, "m")
			l.CheckpointEvery = 0
			for seq := 1; seq <= to; seq++ {
				c := exportCommit(seq)
				c.Added[0].Key = fmt.Sprintf("data/other-%03d/a/part-000001.parquet", seq)
				if seq < from {
					st.apply(mustRead(t, l, int64(seq)))
					continue
				}
				if err := l.Commit(ctx, st, c); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		n      int
		damage func(objstore.Bucket)
	}{
		{"a middle commit lost", 5, del(3)},
		{"the newest commit lost", 5, del(5)},
		{"a stray commit far above", 5, func(b objstore.Bucket) {
			put(t, b, "m/_manifests/00000000000000000099.json", encode(&Commit{Seq: 99, Kind: KindExport}))
		}},
		{"commits lost after a checkpoint", 5, func(b objstore.Bucket) {
			put(t, b, "m/_manifests/"+checkpointKey(50), encode(&checkpoint{State: State{Seq: 50}}))
		}},
		{"a commit lost above the checkpoint", 60, del(55)},
		{"the checkpoint's commit lost", 60, del(50)},
		{"the newest commits lost", 60, del(58, 59, 60)},
		{"the commits from the checkpoint on lost", 60, del(50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60)},
		{"the checkpoint lost", 60, func(b objstore.Bucket) { b.Delete(ctx, "m/_manifests/"+checkpointKey(50)) }},
		{"a stray commit far above the checkpoint", 60, func(b objstore.Bucket) {
			put(t, b, "m/_manifests/00000000000000000999.json", encode(&Commit{Seq: 999, Kind: KindExport}))
		}},
		{"a commit written anew", 5, rewrite(4, 5)},
		{"a commit above the checkpoint written anew", 60, rewrite(55, 60)},
		{"the whole history written anew", 5, rewrite(1, 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mem.New()
			commitN(t, b, tc.n)
			l := NewLog(b, "m")
			if _, err := l.ReadState(ctx); err != nil {
				t.Fatal(err)
			}
			tc.damage(b)
			got, gotErr := l.ReadState(ctx)
			want, wantErr := NewLog(b, "m").ReadState(ctx)
			switch {
			case fmt.Sprint(gotErr) != fmt.Sprint(wantErr):
				t.Fatalf("read again: %v; a fresh read: %v", gotErr, wantErr)
			case wantErr == nil && stateDigest(got) != stateDigest(want):
				t.Fatalf("read again: seq %d, files %v; a fresh read: seq %d, files %v", got.Seq, got.Files, want.Seq, want.Files)
			}
		})
	}
}

func mustRead(t *testing.T, l *Log, seq int64) *Commit {
	t.Helper()
	c, err := l.ReadCommit(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
