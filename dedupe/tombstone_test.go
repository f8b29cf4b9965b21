package dedupe_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/synth"
)

// TestTombstoneOrdering: a winning tombstone removes its key; it is kept
// while an older version could still arrive in the lookback, so a version
// stamped before the delete that a later export brings does not revive the
// key; past the lookback it is dropped; a re-insert after it brings the key
// back.
func TestTombstoneOrdering(t *testing.T) {
	ctx := context.Background()
	d := openDest(t, "file://"+t.TempDir())
	lake, err := synth.New(d, "items")
	if err != nil {
		t.Fatal(err)
	}
	lake.Lookback = 30 * time.Second
	sec := int64(time.Second / time.Microsecond)
	export := func(rows ...synth.Row) {
		t.Helper()
		if _, err := lake.Export(ctx, len(rows), func(i int, r *synth.Row) { *r = rows[i] }); err != nil {
			t.Fatal(err)
		}
	}
	live := func() []string {
		t.Helper()
		var ids []string
		for _, r := range duck(t, d, "items", `SELECT id::VARCHAR || ' ' || name FROM lake WHERE NOT _hw_deleted ORDER BY id`) {
			ids = append(ids, r[0])
		}
		return ids
	}
	compact := func() *dedupe.Result {
		t.Helper()
		return runDedupe(t, d, dedupe.Options{Model: "items", TempDir: t.TempDir()})
	}
	export(synth.Row{ID: 1, UpdatedAt: t0, Name: "a1"}, synth.Row{ID: 2, UpdatedAt: t0, Name: "b1"})
	// Key 1 deleted (a soft-delete row or a delete log entry alike),
	// key 2 updated.
	export(synth.Row{ID: 1, UpdatedAt: t0 + 10*sec, Deleted: true}, synth.Row{ID: 2, UpdatedAt: t0 + 10*sec, Name: "b2"})
	if res := compact(); res.TombstonesDropped != 0 {
		t.Fatalf("dropped %d tombstones within the lookback", res.TombstonesDropped)
	}
	if got := live(); !slices.Equal(got, []string{"2 b2"}) {
		t.Fatalf("live after the delete: %v", got)
	}
	// A version of key 1 stamped before the delete arrives late, in the
	// next run's lookback.
	export(synth.Row{ID: 1, UpdatedAt: t0 + 5*sec, Name: "a-late"}, synth.Row{ID: 3, UpdatedAt: t0 + 11*sec, Name: "c1"})
	compact()
	if got := live(); !slices.Equal(got, []string{"2 b2", "3 c1"}) {
		t.Fatalf("a version older than the tombstone revived its key: %v", got)
	}
	// Past the lookback the tombstone goes.
	export(synth.Row{ID: 4, UpdatedAt: t0 + 100*sec, Name: "d1"})
	if res := compact(); res.TombstonesDropped != 1 {
		t.Fatalf("dropped %d tombstones past the lookback, want 1", res.TombstonesDropped)
	}
	if got := live(); !slices.Equal(got, []string{"2 b2", "3 c1", "4 d1"}) {
		t.Fatalf("live after the tombstone was dropped: %v", got)
	}
	// A re-insert brings the key back.
	export(synth.Row{ID: 1, UpdatedAt: t0 + 101*sec, Name: "a2"}, synth.Row{ID: 3, UpdatedAt: t0 + 101*sec, Deleted: true})
	compact()
	if got := live(); !slices.Equal(got, []string{"1 a2", "2 b2", "4 d1"}) {
		t.Fatalf("live after a re-insert and a delete: %v", got)
	}
}
