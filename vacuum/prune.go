package vacuum

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// prunableRuns lists the run metadata (plans and file checkpoints under
// _runs/<run>/, relative to the model's root) that nothing reads any more:
// that of runs committed, or declared abandoned, by a commit older than
// the retention. Without this, every run, a no-change one too, leaves a
// plan behind, and each export lists them all to find one to resume.
//
// The run of the newest watermark commit keeps its plan: dedupe reads its
// lookback there. A plan is listed after its run's checkpoints, so a
// vacuum that stops midway leaves the run listed by its plan, and the next
// vacuum finishes it.
func prunableRuns(ctx context.Context, b objstore.Bucket, log *manifest.Log, st *manifest.State, committed map[string]int64, history []*manifest.Commit, cutoff time.Time) ([]string, error) {
	prefix := log.Key("_runs") + "/"
	byRun := map[string][]string{}
	err := b.List(ctx, prefix, func(a objstore.Attrs) error {
		rel := strings.TrimPrefix(a.Key, log.Key()+"/")
		run, _, ok := strings.Cut(strings.TrimPrefix(a.Key, prefix), "/")
		if ok {
			byRun[run] = append(byRun[run], rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the runs of %s: %w", log.Model(), err)
	}
	var runs []string
	for run := range byRun {
		seq, done := committed[run]
		dead, abandoned := st.Abandoned[run]
		switch {
		case done && prunable(st, history, seq, cutoff):
			runs = append(runs, run)
		case !done && abandoned && older(history, dead, cutoff):
			runs = append(runs, run)
		}
	}
	sort.Strings(runs)
	var out []string
	for _, run := range runs {
		keys := byRun[run]
		sort.Slice(keys, func(i, j int) bool {
			pi, pj := strings.HasSuffix(keys[i], "/plan.json"), strings.HasSuffix(keys[j], "/plan.json")
			return pi != pj && pj || pi == pj && keys[i] < keys[j]
		})
		out = append(out, keys...)
	}
	return out, nil
}

// older says whether the commit at seq was made before cutoff.
func older(history []*manifest.Commit, seq int64, cutoff time.Time) bool {
	return seq >= 1 && seq <= int64(len(history)) && history[seq-1].Committed.Before(cutoff)
}

// prunable says whether the metadata of the run committed at seq may go:
// its commit is older than the retention, and not the newest that moved
// the watermark, whose plan dedupe and export read.
func prunable(st *manifest.State, history []*manifest.Commit, seq int64, cutoff time.Time) bool {
	return seq != st.LastWatermarkSeq && older(history, seq, cutoff)
}

// committedRuns maps every run that a commit of history names to that
// commit's seq: the runs committed, whether or not a vacuum forgot them
// in the state (forgettable).
func committedRuns(history []*manifest.Commit) map[string]int64 {
	runs := map[string]int64{}
	for _, c := range history {
		if c.RunID != "" {
			runs[c.RunID] = c.Seq
		}
	}
	return runs
}

// forgettable lists the runs that the state still knows as committed but
// whose metadata prunableRuns deletes, or an earlier vacuum deleted: once
// it is gone, nothing lists them, and the state need not name them (see
// manifest.State.Runs). Forgetting them keeps the state from growing with
// every run.
func forgettable(st *manifest.State, history []*manifest.Commit, cutoff time.Time) []string {
	var out []string
	for run, seq := range st.Runs {
		if prunable(st, history, seq, cutoff) {
			out = append(out, run)
		}
	}
	sort.Strings(out)
	return out
}
