package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// ErrChainTaken: another attempt of the same run wrote the checkpoint we
// meant to write, so this attempt must stop.
var ErrChainTaken = errors.New("another attempt of this run extended its checkpoint chain first")

// Keys of runs, relative to the model's root:
//
//	_runs/<run-id>/plan.json
//	_runs/<run-id>/ckpt-<n>.json
//	data/<run-id>/<attempt-id>/part-<n>.parquet
//
// Each builder has its parser beside it, the exact inverse: a key it would
// not have built is not ok.
const planName = "plan.json"

func planKey(runID string) string { return path.Join("_runs", runID, planName) }

// parsePlanKey reads a key built by planKey.
func parsePlanKey(key string) (runID string, ok bool) {
	rest, ok := strings.CutPrefix(key, "_runs/")
	if !ok {
		return "", false
	}
	runID, ok = strings.CutSuffix(rest, "/"+planName)
	if !ok || planKey(runID) != key || strings.Contains(runID, "/") {
		return "", false
	}
	return runID, true
}

func (l *Log) planKey(runID string) string { return l.Key(planKey(runID)) }

func ckptName(n int) string { return fmt.Sprintf("ckpt-%06d.json", n) }

// DataKey is where attempt writes the n-th file of run, relative to the
// model's root. Keys of one attempt sort in the order they were written.
func DataKey(runID, attemptID string, n int) string {
	return path.Join("data", runID, attemptID, fmt.Sprintf("part-%06d.parquet", n))
}

// ParseDataKey reads a key built by DataKey. ok is false for any other key.
func ParseDataKey(key string) (runID, attemptID string, n int, ok bool) {
	rest, ok := strings.CutPrefix(key, "data/")
	if !ok {
		return "", "", 0, false
	}
	runID, rest, ok1 := strings.Cut(rest, "/")
	attemptID, name, ok2 := strings.Cut(rest, "/")
	digits, ok3 := strings.CutPrefix(name, "part-")
	digits, ok4 := strings.CutSuffix(digits, ".parquet")
	if !ok1 || !ok2 || !ok3 || !ok4 || strings.Trim(digits, "0123456789") != "" {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || DataKey(runID, attemptID, n) != key {
		return "", "", 0, false
	}
	return runID, attemptID, n, true
}

// WritePlan stores a new run's plan, create-if-absent.
func (l *Log) WritePlan(ctx context.Context, p *Plan) error {
	p.Version = currentVersion()
	data := encode(p)
	err := l.bucket.Put(ctx, l.planKey(p.RunID), bytes.NewReader(data), objstore.PutOptions{IfNotExist: true, ContentType: "application/json"})
	if errors.Is(err, objstore.ErrExist) {
		// A retry that met our own first write, whose answer was lost: the
		// run id is new, so identical bytes there are ours.
		if there, rerr := objstore.ReadAll(ctx, l.bucket, l.planKey(p.RunID)); rerr == nil && bytes.Equal(there, data) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("write plan of run %s: %w", p.RunID, err)
	}
	return nil
}

// ReadPlan reads a run's plan.
func (l *Log) ReadPlan(ctx context.Context, runID string) (*Plan, error) {
	var p Plan
	if err := l.readJSON(ctx, l.planKey(runID), &p); err != nil {
		return nil, fmt.Errorf("read plan of run %s: %w", runID, err)
	}
	if err := p.Version.check("plan of run " + runID); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListRuns returns the ids of every run with a plan, oldest first.
func (l *Log) ListRuns(ctx context.Context) ([]string, error) {
	return l.ListRunsSince(ctx, time.Time{})
}

// ListRunsSince returns the ids of the runs with a plan whose id was made
// at or after since (see RunIDTime), oldest first. The store skips the
// older ones (see objstore's ListAfter), so the cost is that of the runs
// listed, not of all those that vacuum has not pruned yet.
func (l *Log) ListRunsSince(ctx context.Context, since time.Time) ([]string, error) {
	var runs []string
	root := l.Key() + "/"
	dir := l.Key("_runs") + "/"
	var after string
	if !since.IsZero() {
		// Every id made at since or later sorts after its bare time stamp.
		after = dir + since.UTC().Format(runIDTime)
	}
	err := l.bucket.ListAfter(ctx, dir, after, func(a objstore.Attrs) error {
		if id, ok := parsePlanKey(strings.TrimPrefix(a.Key, root)); ok {
			runs = append(runs, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	sort.Strings(runs)
	return runs, nil
}

// WriteFileCheckpoint appends ck to its run's chain: it is written at
// position ck.N and names position N-1 as its predecessor. ErrChainTaken
// when the position is already taken.
func (l *Log) WriteFileCheckpoint(ctx context.Context, ck *FileCheckpoint) error {
	ck.Version = currentVersion()
	ck.Written = time.Now().UTC()
	if ck.N > 1 {
		ck.Prev = ckptName(ck.N - 1)
	}
	key := l.Key("_runs", ck.RunID, ckptName(ck.N))
	data := encode(ck)
	err := l.bucket.Put(ctx, key, bytes.NewReader(data), objstore.PutOptions{IfNotExist: true, ContentType: "application/json"})
	if errors.Is(err, objstore.ErrExist) {
		// Ours, if a retry met our own first write.
		var there FileCheckpoint
		if rerr := l.readJSON(ctx, key, &there); rerr == nil && there.AttemptID == ck.AttemptID && there.File.Key == ck.File.Key {
			return nil
		}
		return fmt.Errorf("write checkpoint %d of run %s: %w", ck.N, ck.RunID, ErrChainTaken)
	}
	if err != nil {
		return fmt.Errorf("write checkpoint %d of run %s: %w", ck.N, ck.RunID, err)
	}
	return nil
}

// ReadChain reads a run's checkpoints from the first on, stopping at the
// first gap: only a contiguous chain counts, and a file that no checkpoint
// of it names is an orphan.
func (l *Log) ReadChain(ctx context.Context, runID string) ([]FileCheckpoint, error) {
	var chain []FileCheckpoint
	for n := 1; ; n++ {
		var ck FileCheckpoint
		err := l.readJSON(ctx, l.Key("_runs", runID, ckptName(n)), &ck)
		if errors.Is(err, objstore.ErrNotExist) {
			return chain, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read checkpoint %d of run %s: %w", n, runID, err)
		}
		if err := ck.Version.check("checkpoint"); err != nil {
			return nil, err
		}
		if ck.N != n || (n > 1 && ck.Prev != ckptName(n-1)) {
			return nil, fmt.Errorf("checkpoint %d of run %s is not part of its chain", n, runID)
		}
		chain = append(chain, ck)
	}
}
