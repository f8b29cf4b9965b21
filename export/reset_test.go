package export_test

import (
	"context"
	"errors"
	"testing"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/manifest"
)

// TestResetReplays resets the watermark and checks that the next export
// reads from the new watermark minus the lookback, and that an export
// planned before a reset cannot commit after it.
func TestResetReplays(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 minute', 'x', 1 FROM generate_series(1, 100) g`)
	l.mustExport(l.options())
	reset := func(to string) *manifest.Commit {
		t.Helper()
		d, err := destination.Open(context.Background(), l.destURL(), "")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		c, _, err := manifest.NewLog(d, l.model).Reset(context.Background(), manifest.ResetRequest{Watermark: to, Reason: "replay", User: "u", Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A reset racing an export: the export planned on the old watermark
	// loses, and commits nothing.
	err := l.stalledExport(l.options(), func(*manifest.Plan) { reset("2026-01-01 01:00:00+00") })
	if !errors.Is(err, export.ErrRaceLost) || !errors.Is(err, manifest.ErrSuperseded) {
		t.Fatalf("an export planned before a reset: %v", err)
	}
	st := l.state()
	if st.Seq != 2 || *st.Watermark != "2026-01-01 01:00:00.000000+00" {
		t.Fatalf("state after the reset: seq %d watermark %s", st.Seq, *st.Watermark)
	}
	// The replay: from the new watermark minus a lookback of 10 minutes.
	o := l.options()
	o.Lookback = 10 * 60 * 1e9
	res := l.mustExport(o)
	if got := *res.Plan.Interval.From; got != "2026-01-01 00:50:00.000000+00" {
		t.Fatalf("the export after the reset reads from %s", got)
	}
	// Minutes 50 to 100: 51 rows, read again as new versions.
	if m := res.Commit.Metrics; m.RowsTransferred != 51 {
		t.Fatalf("replayed %d rows, want 51", m.RowsTransferred)
	}
	if got := l.state().Watermark; *got <= "2026-01-01 01:40:00" {
		t.Fatalf("the watermark after the replay is %s", *got)
	}
}
