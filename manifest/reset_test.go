package manifest

import (
	"context"
	"errors"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

// TestReset moves the watermark back by seq and by value, refuses what is
// not a move back or has no reason, and checks that no other kind of
// commit can move it back.
func TestReset(t *testing.T) {
	ctx := context.Background()
	l := NewLog(mem.New(), "m")
	id := Identity{PrimaryKey: []string{"id"}, ModifiedAt: "updated_at", ModifiedAtKind: "timestamptz"}
	st := &State{}
	for _, w := range []string{"2026-01-01 00:00:01.000000+00", "2026-01-01 00:00:02.000000+00", "2026-01-01 00:00:03.000000+00"} {
		if err := l.Commit(ctx, st, &Commit{Kind: KindExport, Identity: id, Watermark: wm(w)}); err != nil {
			t.Fatal(err)
		}
	}
	// No kind but reset moves it back.
	for _, kind := range []string{KindExport, KindFullRefresh, KindDedupe, KindReconcile, KindBackfill} {
		err := l.Commit(ctx, st, &Commit{Kind: kind, Identity: id, Watermark: wm("2026-01-01 00:00:02.000000+00")})
		if !errors.Is(err, ErrBackwards) {
			t.Errorf("a %s commit moving the watermark back: %v", kind, err)
		}
	}
	for _, req := range []ResetRequest{
		{ToSeq: 1},    // no reason
		{Reason: "r"}, // no target
		{ToSeq: 1, Watermark: "2026-01-01 00:00:01+00", Reason: "r"}, // both
		{Watermark: "2026-01-01 00:00:03+00", Reason: "r"},           // not below
		{Watermark: "2027-01-01 00:00:00+00", Reason: "r"},           // above
		{Watermark: "yesterday", Reason: "r"},
		{ToSeq: 3, Reason: "r"}, // the current watermark
		{ToSeq: 9, Reason: "r"},
	} {
		if _, _, err := l.Reset(ctx, req); !errors.Is(err, ErrResetRefused) {
			t.Errorf("%+v: %v, want a refusal", req, err)
		}
	}
	if st, err := l.ReadState(ctx); err != nil || st.Seq != 3 {
		t.Fatalf("a refused reset committed: %v %+v", err, st)
	}
	c, got, err := l.Reset(ctx, ResetRequest{ToSeq: 1, Reason: "replay the lost hour", User: "ops", Host: "box"})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Reset
	if c.Kind != KindReset || *got.Watermark != "2026-01-01 00:00:01.000000+00" || got.LastWatermarkSeq != 4 ||
		*r.OldWatermark != "2026-01-01 00:00:03.000000+00" || r.NewWatermark != *got.Watermark || r.Reason != "replay the lost hour" || r.User != "ops" || r.Host != "box" {
		t.Fatalf("reset commit %+v report %+v state watermark %s", c, r, *got.Watermark)
	}
	// By value, normalized; then an export may move it forward again.
	if _, got, err = l.Reset(ctx, ResetRequest{Watermark: "2026-01-01 00:00:00.5+00", Reason: "again"}); err != nil || *got.Watermark != "2026-01-01 00:00:00.500000+00" {
		t.Fatalf("reset by value: %v", err)
	}
	if err := l.Commit(ctx, got, &Commit{Kind: KindExport, Identity: id, Watermark: wm("2026-01-01 00:00:04.000000+00")}); err != nil {
		t.Fatal(err)
	}
}
