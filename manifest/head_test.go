package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

// commitN writes n export commits to a fresh log, one file each.
func commitN(t *testing.T, b objstore.Bucket, n int) *State {
	t.Helper()
	l := NewLog(b, "m")
	st := &State{}
	for i := 1; i <= n; i++ {
		if err := l.Commit(context.Background(), st, exportCommit(i)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func put(t *testing.T, b objstore.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.Put(context.Background(), key, bytes.NewReader(data), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestGapStopsEveryReader damages the log in each way that leaves a hole
// below its head and checks that no reader takes the hole for the end.
func TestGapStopsEveryReader(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		damage  func(b objstore.Bucket)
		missing int64
	}{
		{"a middle commit lost", func(b objstore.Bucket) { b.Delete(ctx, "m/_manifests/"+commitKey(3)) }, 3},
		{"the first commit lost", func(b objstore.Bucket) { b.Delete(ctx, "m/_manifests/"+commitKey(1)) }, 1},
		{"a stray commit far above", func(b objstore.Bucket) {
			put(t, b, "m/_manifests/00000000000000000099.json", encode(&Commit{Seq: 99, Kind: KindExport}))
		}, 6},
		{"commits lost after a checkpoint", func(b objstore.Bucket) {
			put(t, b, "m/_manifests/"+checkpointKey(50), encode(&checkpoint{State: State{Seq: 50}}))
		}, 6},
		// A log past its first state checkpoint is read from the one the
		// hint names: what lies above it must still show.
		{"a commit lost above the hinted checkpoint", func(b objstore.Bucket) {
			b.Delete(ctx, "m/_manifests/"+commitKey(55))
		}, -55},
		{"the hinted checkpoint's commit lost", func(b objstore.Bucket) {
			b.Delete(ctx, "m/_manifests/"+commitKey(50))
		}, -50},
		{"a stray commit far above the hinted checkpoint", func(b objstore.Bucket) {
			put(t, b, "m/_manifests/00000000000000000999.json", encode(&Commit{Seq: 999, Kind: KindExport}))
		}, -61},
		{"commits lost after a checkpoint above the hinted one", func(b objstore.Bucket) {
			put(t, b, "m/_manifests/"+checkpointKey(100), encode(&checkpoint{State: State{Seq: 100}}))
		}, -61},
		{"the newest commits lost, the hint naming their checkpoint", func(b objstore.Bucket) {
			for seq := int64(50); seq <= 60; seq++ {
				b.Delete(ctx, "m/_manifests/"+commitKey(seq))
			}
		}, -50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mem.New()
			// A negative missing seq names a case on a log of 60 commits.
			if tc.missing < 0 {
				tc.missing = -tc.missing
				commitN(t, b, 60)
			} else {
				commitN(t, b, 5)
			}
			tc.damage(b)
			l := NewLog(b, "m")
			want := fmt.Sprintf("commit %d is missing", tc.missing)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: got %v, want ErrGap saying %q", what, err, want)
				}
			}
			_, err := l.ReadState(ctx)
			check("ReadState", err)
			_, err = l.Fold(ctx, nil)
			check("Fold", err)
			calls := 0
			err = l.History(ctx, func(*Commit) error { calls++; return nil })
			check("History", err)
			if calls != 0 {
				t.Errorf("History showed %d commits of a log with a gap", calls)
			}
			_, err = l.Head(ctx)
			check("Head", err)
			check("WriteSymlinkManifestFrom", l.WriteSymlinkManifestFrom(ctx, commitN(t, mem.New(), 1), func(k string) string { return k }))
		})
	}
}

// TestNamesThatAreNotCommitsAreIgnored: only a 20-digit seq is a commit.
func TestNamesThatAreNotCommitsAreIgnored(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	commitN(t, b, 3)
	for _, name := range []string{"7.json", "notes.json", "_probe-x", "0000000000000000000a.json", "00000000000000000000.json", "00000000000000000009.json.tmp"} {
		put(t, b, "m/_manifests/"+name, []byte("{}"))
	}
	st, err := NewLog(b, "m").ReadState(ctx)
	if err != nil || st.Seq != 3 {
		t.Fatalf("read state: seq %v, %v", st, err)
	}
}

// countingGets counts the commits read.
type countingGets struct {
	objstore.Bucket
	commits atomic.Int64
}

func (c *countingGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if _, cp, ok := parseLogName(key[strings.LastIndex(key, "/")+1:]); ok && !cp {
		c.commits.Add(1)
	}
	return c.Bucket.Get(ctx, key)
}

// TestDoubtedCheckpointIsFoldedOver alters the state checkpoint in each way
// that makes it disagree with the log, or unreadable, and checks that the
// state read is the log's own fold: every committed file is there.
func TestDoubtedCheckpointIsFoldedOver(t *testing.T) {
	ctx := context.Background()
	key := "m/_manifests/" + checkpointKey(50)
	edit := func(f func(m map[string]any)) func(b objstore.Bucket) {
		return func(b objstore.Bucket) {
			data, err := objstore.ReadAll(ctx, b, key)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			f(m)
			b.Delete(ctx, key)
			put(t, b, key, encode(m))
		}
	}
	dropFile := func(m map[string]any) { m["files"] = m["files"].([]any)[1:] }
	for _, tc := range []struct {
		name   string
		damage func(b objstore.Bucket)
	}{
		{"a file dropped", edit(dropFile)},
		{"a file dropped, no digest (an old checkpoint)", edit(func(m map[string]any) { dropFile(m); delete(m, "state_sha256"); delete(m, "commit_id") })},
		{"another history's commit id", edit(func(m map[string]any) { m["commit_id"] = NewID() })},
		{"another seq inside", edit(func(m map[string]any) { m["seq"] = 49 })},
		{"not JSON", func(b objstore.Bucket) { b.Delete(ctx, key); put(t, b, key, []byte("{\"seq\": 50, ")) }},
		{"a hint to a missing checkpoint", func(b objstore.Bucket) {
			b.Delete(ctx, key)
			put(t, b, "m/_manifests/_last_checkpoint", []byte(`{"seq": 50}`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mem.New()
			want := commitN(t, b, 60)
			tc.damage(b)
			got, err := NewLog(b, "m").ReadState(ctx)
			if err != nil {
				t.Fatalf("read state: %v", err)
			}
			if got.Seq != 60 || stateDigest(got) != stateDigest(want) {
				t.Fatalf("read state: seq %d, %d files; the log folds to seq %d, %d files", got.Seq, len(got.Files), want.Seq, len(want.Files))
			}
		})
	}
}

// TestSoundCheckpointIsUsed: a checkpoint that proves itself spares the
// fold of the commits below it.
func TestSoundCheckpointIsUsed(t *testing.T) {
	ctx := context.Background()
	b := &countingGets{Bucket: mem.New()}
	want := commitN(t, b, 60)
	b.commits.Store(0)
	got, err := NewLog(b, "m").ReadState(ctx)
	if err != nil || stateDigest(got) != stateDigest(want) {
		t.Fatalf("read state: %v", err)
	}
	// Commit 50 is read to check the checkpoint, then 51..60.
	if n := b.commits.Load(); n != 11 {
		t.Fatalf("read %d commits, want 11", n)
	}
}

// TestOldLayoutFormIsRead: checkpoints used to hold the dedupe layout as
// base64, commits as a JSON object. Checkpoints now hold the object too,
// and one of the old form still reads as the same state.
func TestOldLayoutFormIsRead(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	l := NewLog(b, "m")
	l.CheckpointEvery = 1
	st := &State{}
	layout := json.RawMessage(`{"scheme":"hash","buckets":4}`)
	if err := l.Commit(ctx, st, &Commit{Kind: KindDedupe, RunID: "d", Layout: layout, Added: []File{{Key: "data/d/a/part-000001.parquet"}}}); err != nil {
		t.Fatal(err)
	}
	key := "m/_manifests/" + checkpointKey(1)
	written, err := objstore.ReadAll(ctx, b, key)
	if err != nil || !bytes.Contains(written, []byte(`"layout": {`)) {
		t.Fatalf("checkpoint written: %v\n%s", err, written)
	}
	if got, err := l.ReadState(ctx); err != nil || compact(got.Layout) != string(layout) {
		t.Fatalf("read state: layout %s, %v", got.Layout, err)
	}

	var m map[string]any
	json.Unmarshal(written, &m)
	m["layout"] = []byte(layout) // encoded as base64, as State.Layout []byte was
	delete(m, "state_sha256")
	old, _ := json.Marshal(m)
	if !bytes.Contains(old, []byte(`"layout":"eyJ`)) {
		t.Fatalf("not the old form: %s", old)
	}
	b.Delete(ctx, key)
	put(t, b, key, old)
	ck, err := l.readCheckpoint(ctx, 1)
	if err != nil || compact(ck.Layout) != string(layout) || stateDigest(&ck.State) != stateDigest(st) {
		t.Fatalf("old checkpoint: layout %s, %v; same state as the log's: %v", ck.Layout, err, stateDigest(&ck.State) == stateDigest(st))
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	json.Compact(&b, raw)
	return b.String()
}

// countingLists counts the keys that listings return.
type countingLists struct {
	objstore.Bucket
	listed atomic.Int64
}

func (c *countingLists) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return c.ListAfter(ctx, prefix, "", fn)
}

func (c *countingLists) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	return c.Bucket.ListAfter(ctx, prefix, after, func(a objstore.Attrs) error {
		c.listed.Add(1)
		return fn(a)
	})
}

// TestStateReadListsTheTailOnly: the readers of the state list the log
// after the newest state checkpoint, so the keys they list do not grow
// with the log's length; Fold, which trusts no checkpoint, lists it all.
func TestStateReadListsTheTailOnly(t *testing.T) {
	ctx := context.Background()
	var tails []int64
	for _, n := range []int{110, 1010} {
		b := &countingLists{Bucket: mem.New()}
		want := commitN(t, b, n)
		l := NewLog(b, "m")
		b.listed.Store(0)
		st, err := l.ReadState(ctx)
		if err != nil || stateDigest(st) != stateDigest(want) {
			t.Fatalf("%d commits: read state: %v", n, err)
		}
		head, err := l.Head(ctx)
		if err != nil || head != int64(n) {
			t.Fatalf("%d commits: head %d, %v", n, head, err)
		}
		if head, err := l.HeadSince(ctx, st.Seq); err != nil || head != int64(n) {
			t.Fatalf("%d commits: head since %d: %d, %v", n, st.Seq, head, err)
		}
		tails = append(tails, b.listed.Load())
		b.listed.Store(0)
		if _, err := l.Fold(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := b.listed.Load(); got < int64(n) {
			t.Fatalf("%d commits: Fold listed %d keys", n, got)
		}
	}
	if tails[0] != tails[1] {
		t.Fatalf("reading the state and head listed %d keys at 110 commits, %d at 1010", tails[0], tails[1])
	}
}

// TestCommitLostBelowTheCheckpoint: a commit lost below a proven state
// checkpoint leaves the state whole, since the checkpoint folds it, and no
// writer writes below the head: readers of the state go on, and Fold and
// Verify, which fold from commit 1, report the gap.
func TestCommitLostBelowTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	want := commitN(t, b, 60)
	b.Delete(ctx, "m/_manifests/"+commitKey(7))
	l := NewLog(b, "m")
	if st, err := l.ReadState(ctx); err != nil || stateDigest(st) != stateDigest(want) {
		t.Fatalf("read state: %v", err)
	}
	if _, err := l.Fold(ctx, nil); !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), "commit 7 is missing") {
		t.Fatalf("fold: %v, want the gap at 7", err)
	}
	problems, _, err := l.Verify(ctx)
	if err != nil || len(problems) == 0 || !strings.Contains(problems[0], "commit 7 is missing") {
		t.Fatalf("verify: %q, %v", problems, err)
	}
}
