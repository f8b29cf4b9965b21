package export_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/faults"
	"github.com/highwater-dev/highwater/manifest"
)

// TestNoChangeCostIsFlat counts what a no-change export asks of the store
// (the file backend) on top of 1, 100 and 1,000 commits of history, one
// run an hour, every plan still there (no vacuum): the same at 100 as at
// 1,000, and above the cost at 1 commit by no more than what a state
// checkpoint costs to use, whatever the log's length.
func TestNoChangeCostIsFlat(t *testing.T) {
	// Reading the hint's checkpoint and the commit it folded up to, and
	// the hint itself, which the tail listings after it return (three per
	// export: its two reads of the state and the check after the symlink
	// manifest).
	const checkpointCost = 3
	var counts []*faults.Counting
	for _, n := range []int{1, 100, 1000} {
		_, c := noChangeOnHistory(t, n)
		counts = append(counts, c)
	}
	at1, at100, at1000 := counts[0].Counts(), counts[1].Counts(), counts[2].Counts()
	if !maps.Equal(at100, at1000) {
		t.Errorf("a no-change export asks more of the store at 1,000 commits than at 100:\n  100: %s\n 1000: %s", counts[1], counts[2])
	}
	for _, op := range slices.Sorted(maps.Keys(at1000)) {
		if at1000[op] > at1[op]+checkpointCost {
			t.Errorf("%s: %d at 1,000 commits, %d at 1", op, at1000[op], at1[op])
		}
	}
}

// noChangeOnHistory makes a lake whose model has n export runs of
// history (synthesizeHistory) and nothing new in its source, and runs one
// export of it on a counting store, whose counts it returns.
func noChangeOnHistory(t *testing.T, n int) (*lake, *faults.Counting) {
	t.Helper()
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 second', 'n' || g, g FROM generate_series(1, 10) g`)
	// A real export, under another name, gives the identity, schema and
	// watermark of the history written below it.
	scratch := l.options()
	scratch.Model = "scratch"
	first := l.mustExport(scratch).Commit
	synthesizeHistory(t, l, first, n)
	c := l.countedExport(l.options())
	t.Logf("no-change export on %d commits: %s", n, c)
	return l, c
}

// synthesizeHistory writes n export runs of the lake's model, a plan and a
// commit each, planned an hour apart and ending an hour ago, with first's
// identity, schema and watermark and no files.
func synthesizeHistory(t *testing.T, l *lake, first *manifest.Commit, n int) {
	t.Helper()
	ctx := context.Background()
	d := l.openDest()
	log := manifest.NewLog(d, l.model)
	st := &manifest.State{}
	for i := range n {
		planned := time.Now().Add(-time.Duration(n-i) * time.Hour)
		p := &manifest.Plan{RunID: manifest.NewRunID(planned), Model: l.model, Kind: manifest.KindExport, Identity: first.Identity,
			Interval: *first.Interval, ToBound: first.ToBound, PrevWatermark: st.Watermark, BaseSeq: st.Seq,
			Lookback: "0s", HWVersion: planned.UnixMicro(), Created: planned}
		if err := log.WritePlan(ctx, p); err != nil {
			t.Fatal(err)
		}
		c := &manifest.Commit{Kind: manifest.KindExport, RunID: p.RunID, Identity: first.Identity, Interval: first.Interval,
			ToBound: first.ToBound, Watermark: first.Watermark, Metrics: &manifest.Metrics{}}
		if i == 0 {
			c.Schema = first.Schema
		}
		if err := log.Commit(ctx, st, c); err != nil {
			t.Fatal(err)
		}
	}
}

// countedExport runs one export and returns what it asked of the store.
func (l *lake) countedExport(opts export.Options) *faults.Counting {
	l.t.Helper()
	ctx := context.Background()
	src := l.source(ctx)
	defer src.Close(ctx)
	d := l.openDest()
	c := faults.NewCounting(d.Bucket)
	d.Bucket = c
	res, err := export.Run(ctx, src, d, d.ObjectURL, opts)
	if err != nil {
		l.t.Fatalf("export: %v", err)
	}
	if res.Commit.Metrics.RowsTransferred != 0 || len(res.Commit.Added) != 0 {
		l.t.Fatalf("the export was not a no-change one: %d rows, %d files", res.Commit.Metrics.RowsTransferred, len(res.Commit.Added))
	}
	return c
}

// TestResumeAcrossClockSkew: resume looks for unfinished runs only among
// those planned since the run of the last watermark move, less the skew
// allowed between machines' clocks. A run planned on the head by a machine
// whose clock is minutes behind is still resumed; one whose id says it was
// planned long before is not, and the run planned instead supersedes it.
func TestResumeAcrossClockSkew(t *testing.T) {
	for _, tc := range []struct {
		behind  time.Duration
		resumed bool
	}{
		{5 * time.Minute, true},
		{time.Hour, false},
	} {
		t.Run(tc.behind.String(), func(t *testing.T) {
			l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`)
			opts := l.options()
			first := l.mustExport(opts)
			l.exportCrashing(opts, "after-plan", 1)
			planned, _ := manifest.RunIDTime(first.Plan.RunID)
			skewed := l.replan(manifest.NewRunID(planned.Add(-tc.behind)))
			res := l.mustExport(opts)
			if res.Resumed != tc.resumed || (res.Plan.RunID == skewed) != tc.resumed {
				t.Fatalf("a run planned %s behind on the head: resumed %v (run %s, the skewed one %s), want %v",
					tc.behind, res.Resumed, res.Plan.RunID, skewed, tc.resumed)
			}
		})
	}
}

// replan gives the one unfinished run of the lake's model the id id, as if
// a machine whose clock differs had planned it, and returns id.
func (l *lake) replan(id string) string {
	l.t.Helper()
	ctx := context.Background()
	d := l.openDest()
	log := manifest.NewLog(d, l.model)
	st, err := log.ReadState(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	runs, err := log.ListRuns(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	var open []string
	for _, r := range runs {
		if st.Ended(r) == nil {
			open = append(open, r)
		}
	}
	if len(open) != 1 {
		l.t.Fatalf("%d unfinished runs, want 1", len(open))
	}
	p, err := log.ReadPlan(ctx, open[0])
	if err != nil {
		l.t.Fatal(err)
	}
	p.RunID = id
	if err := log.WritePlan(ctx, p); err != nil {
		l.t.Fatal(err)
	}
	if err := d.Delete(ctx, log.Key("_runs", open[0], "plan.json")); err != nil {
		l.t.Fatal(err)
	}
	return id
}
