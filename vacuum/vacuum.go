// Package vacuum deletes the objects of a model that no reader can see: the
// files that commits older than the retention removed, the files of runs
// that it first declares abandoned in a commit of its own, and the plans
// and checkpoints of runs done with.
package vacuum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/progress"
	"github.com/highwater-dev/highwater/manifest"
)

// ErrNoState: the model has no commits to vacuum.
var ErrNoState = errors.New("the model has no commits")

// Options describe one vacuum of one model.
type Options struct {
	Model string
	// OlderThan is the retention: only removals, plans and commits older
	// than this are considered.
	OlderThan time.Duration
	// DryRun lists what would be declared and deleted, and changes nothing.
	DryRun bool
	// Now is the clock; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
	// Progress, when set, counts the objects deleted (of those to delete)
	// and their bytes, for a display on a terminal.
	Progress *progress.Counter
	// Failpoint is called at "vacuum-after-commit" and "vacuum-mid-delete".
	Failpoint func(name string)
	// BeforeDelete, when set, is called with the state that decided the
	// deletions and the objects about to go (relative to the model's root),
	// before the first is deleted: a table format published from the log
	// drops what names them (package iceberg expires its snapshots). An
	// error deletes nothing.
	BeforeDelete func(ctx context.Context, st *manifest.State, doomed []string) error
}

// Result says what a vacuum did, or would do on a dry run.
type Result struct {
	// Declared lists the runs (and "run/attempt" of committed runs) that
	// this vacuum declared abandoned.
	Declared []string
	Commit   *manifest.Commit
	// Deleted lists the deleted objects, relative to the model's root.
	Deleted []string
	Bytes   int64
	// Pruned lists the run metadata deleted (prunableRuns), relative to
	// the model's root.
	Pruned []string
	// Forgotten lists the committed runs whose metadata is gone, which
	// this vacuum took out of the state in a commit of its own (or would).
	Forgotten []string
}

// Run deletes objects that no reader can see: files removed from the
// committed set by a commit older than the retention, the files of runs it
// first declares abandoned in a commit of its own, and the plans and
// checkpoints of runs done with (prunableRuns). It never deletes
// a committed file, and never decides by an object's age.
func Run(ctx context.Context, b objstore.Bucket, opts Options) (*Result, error) {
	if opts.Model == "" {
		return nil, errors.New("no model name")
	}
	if opts.OlderThan <= 0 {
		return nil, fmt.Errorf("retention %s must be positive", opts.OlderThan)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Failpoint == nil {
		opts.Failpoint = func(string) {}
	}
	logger := opts.Logger.With("model", opts.Model)
	log := manifest.NewLog(b, opts.Model)
	// Vacuum deletes what the state does not name, so it folds the log
	// itself: a state checkpoint that lost a file would have it deleted.
	var history []*manifest.Commit
	st, err := log.Fold(ctx, func(c *manifest.Commit) error {
		history = append(history, summary(c))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the state of %s: %w", opts.Model, err)
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("vacuum %s: %w", opts.Model, ErrNoState)
	}
	cutoff := opts.Now().Add(-opts.OlderThan)
	objects := map[string]int64{}
	dataPrefix := log.Key("data") + "/"
	if err := b.List(ctx, dataPrefix, func(a objstore.Attrs) error {
		objects[strings.TrimPrefix(a.Key, log.Key()+"/")] = a.Size
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list the data of %s: %w", opts.Model, err)
	}
	committed := committedRuns(history)
	declare, err := findAbandoned(ctx, log, st, committed, history, objects, cutoff)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	if len(declare) > 0 && !opts.DryRun {
		if st, err = declareAbandoned(ctx, log, declare, res); err != nil {
			return nil, err
		}
		opts.Failpoint("vacuum-after-commit")
	} else if opts.DryRun {
		res.Declared = declare
	}
	doomed := deletable(st, objects, cutoff, res.Declared)
	pruned, err := prunableRuns(ctx, b, log, st, committed, history, cutoff)
	if err != nil {
		return nil, err
	}
	forget := forgettable(st, history, cutoff)
	if opts.DryRun {
		for _, k := range doomed {
			res.Deleted = append(res.Deleted, k)
			res.Bytes += objects[k]
		}
		res.Pruned, res.Forgotten = pruned, forget
		return res, nil
	}
	if opts.BeforeDelete != nil && len(doomed) > 0 {
		if err := opts.BeforeDelete(ctx, st, doomed); err != nil {
			return res, fmt.Errorf("before deleting from %s: %w", opts.Model, err)
		}
	}
	opts.Progress.AddTotal(int64(len(doomed)))
	for i, k := range doomed {
		if i == len(doomed)/2 {
			opts.Failpoint("vacuum-mid-delete")
		}
		if err := b.Delete(ctx, log.Key(k)); err != nil {
			return res, fmt.Errorf("delete %q: %w", k, err)
		}
		res.Deleted = append(res.Deleted, k)
		res.Bytes += objects[k]
		opts.Progress.Add(1)
		opts.Progress.AddFile(objects[k])
	}
	for _, k := range pruned {
		if err := b.Delete(ctx, log.Key(k)); err != nil {
			return res, fmt.Errorf("delete %q: %w", k, err)
		}
		res.Pruned = append(res.Pruned, k)
	}
	if len(forget) > 0 {
		// Only once their metadata is deleted: a run the state forgot
		// while its plan is there would look unfinished to whoever lists
		// the runs.
		if err := forgetRuns(ctx, log, forget, res); err != nil {
			return res, err
		}
	}
	logger.Info("vacuumed", "declared_abandoned", len(res.Declared), "deleted", len(res.Deleted), "bytes", res.Bytes, "runs_forgotten", len(res.Forgotten))
	return res, nil
}

// findAbandoned picks the runs that can never commit, and the stray
// attempts of committed runs. It is conservative: a run counts only when
// its plan, its newest checkpoint and anything that killed it are older
// than the retention.
func findAbandoned(ctx context.Context, log *manifest.Log, st *manifest.State, committed map[string]int64, history []*manifest.Commit, objects map[string]int64, cutoff time.Time) ([]string, error) {
	runs, err := log.ListRuns(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range runs {
		_, done := committed[id]
		if _, dead := st.Abandoned[id]; done || dead {
			continue
		}
		p, err := log.ReadPlan(ctx, id)
		if err != nil {
			return nil, err
		}
		if !p.Created.Before(cutoff) {
			continue
		}
		chain, err := log.ReadChain(ctx, id)
		if err != nil {
			return nil, err
		}
		if n := len(chain); n > 0 && !chain[n-1].Written.Before(cutoff) {
			continue // still writing files lately
		}
		if killer := killedBy(p, history); killer > 0 && history[killer-1].Committed.Before(cutoff) {
			out = append(out, id)
		}
	}
	// Files under a committed run that no commit ever named belong to
	// attempts that lost; the run cannot commit again.
	ever := map[string]bool{}
	for _, f := range st.Files {
		ever[f.Key] = true
	}
	for k := range st.Removed {
		ever[k] = true
	}
	strays := map[string]bool{}
	for k := range objects {
		run, attempt, _, ok := manifest.ParseDataKey(k)
		if !ok || ever[k] {
			continue
		}
		seq, done := committed[run]
		if !done || !history[seq-1].Committed.Before(cutoff) {
			continue
		}
		ra := run + "/" + attempt
		if _, dead := st.Abandoned[ra]; !dead {
			strays[ra] = true
		}
	}
	for ra := range strays {
		out = append(out, ra)
	}
	sort.Strings(out)
	return out, nil
}

// summary is what vacuum keeps of each commit to ask manifest.Kills: its
// kind, removals and time, not the added files, schema and metrics, which
// over a long log would hold the committed set a second time.
func summary(c *manifest.Commit) *manifest.Commit {
	return &manifest.Commit{Seq: c.Seq, Kind: c.Kind, RunID: c.RunID, Removed: c.Removed, Committed: c.Committed}
}

// killedBy returns the seq of the first commit after which the plan can
// never commit, or 0 while it still could.
func killedBy(p *manifest.Plan, history []*manifest.Commit) int64 {
	for _, c := range history[min(p.BaseSeq, int64(len(history))):] {
		if manifest.Kills(p.Kind, c) {
			return c.Seq
		}
	}
	return 0
}

// declareAbandoned commits the declaration before anything is deleted, so
// that an abandoned run can no longer commit. A run that committed
// meanwhile is left out.
func declareAbandoned(ctx context.Context, log *manifest.Log, declare []string, res *Result) (*manifest.State, error) {
	c, _, err := log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		var still []string
		for _, id := range declare {
			run, _, _ := strings.Cut(id, "/")
			if _, done := st.Runs[run]; done && !strings.Contains(id, "/") {
				continue
			}
			still = append(still, id)
		}
		if len(still) == 0 {
			return nil, errNothingToDeclare
		}
		return &manifest.Commit{Kind: manifest.KindVacuum, RunID: "", Identity: *st.Identity,
			Watermark: st.Watermark, FromFloor: st.FromFloor, Abandoned: still}, nil
	})
	switch {
	case err == nil:
		res.Declared, res.Commit = c.Abandoned, c
	case err != errNothingToDeclare:
		return nil, err
	}
	// Folded from the log for the same reason as in Run: what this
	// returns decides the deletions.
	st, err := log.Fold(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("read the state of %s: %w", log.Model(), err)
	}
	return st, nil
}

// forgetRuns commits that the runs, committed and their metadata deleted,
// leave the state's Runs. Those another vacuum forgot meanwhile are left
// out; a commit since, which only ever adds runs of its own, changes
// nothing else.
func forgetRuns(ctx context.Context, log *manifest.Log, forget []string, res *Result) error {
	c, _, err := log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		var still []string
		for _, id := range forget {
			if _, known := st.Runs[id]; known {
				still = append(still, id)
			}
		}
		if len(still) == 0 {
			return nil, errNothingToForget
		}
		return &manifest.Commit{Kind: manifest.KindVacuum, Identity: *st.Identity,
			Watermark: st.Watermark, FromFloor: st.FromFloor, Forgotten: still}, nil
	})
	switch {
	case err == nil:
		res.Forgotten = c.Forgotten
	case err != errNothingToForget:
		return fmt.Errorf("forget the pruned runs of %s: %w", log.Model(), err)
	}
	return nil
}

// errNothingToForget: another vacuum forgot every run meanwhile.
var errNothingToForget = errors.New("nothing left to forget")

// errNothingToDeclare: every run to declare committed meanwhile.
var errNothingToDeclare = errors.New("nothing left to declare abandoned")

// deletable lists the objects that may go: removed by a commit older than
// the retention, or under a run or attempt declared abandoned; never a
// committed file.
func deletable(st *manifest.State, objects map[string]int64, cutoff time.Time, dryRunDeclared []string) []string {
	live := st.FileSet()
	dead := map[string]bool{}
	for id := range st.Abandoned {
		dead[id] = true
	}
	for _, id := range dryRunDeclared {
		dead[id] = true
	}
	var out []string
	for k := range objects {
		if _, ok := live[k]; ok {
			continue
		}
		if rm, ok := st.Removed[k]; ok && time.Unix(rm.Committed, 0).Before(cutoff) {
			out = append(out, k)
			continue
		}
		run, attempt, _, ok := manifest.ParseDataKey(k)
		if !ok {
			continue
		}
		if _, removed := st.Removed[k]; removed {
			continue // its removal is still within the retention
		}
		if dead[run] || dead[run+"/"+attempt] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
