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
func prunableRuns(ctx context.Context, b objstore.Bucket, log *manifest.Log, st *manifest.State, history []*manifest.Commit, cutoff time.Time) ([]string, error) {
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
	old := func(seq int64) bool {
		return seq >= 1 && seq <= int64(len(history)) && history[seq-1].Committed.Before(cutoff)
	}
	var runs []string
	for run := range byRun {
		seq, done := st.Runs[run]
		dead, abandoned := st.Abandoned[run]
		switch {
		case done && seq == st.LastWatermarkSeq:
		case done && old(seq), !done && abandoned && old(dead):
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
