package manifest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// ErrGap: a commit below the newest one is missing from the log, so the
// state cannot be folded. Nothing is read as state or written while there
// is one: a commit written into the gap would fork the history, and one
// written after it would build on a state that lacks the lost commit.
var ErrGap = errors.New("the commit log has a gap")

// Names in <model>/_manifests/. Commits and state checkpoints share the
// directory and a 20-digit zero-padded seq, so that their names sort in seq
// order in every store's listing.
const (
	commitSuffix     = ".json"
	checkpointSuffix = ".checkpoint.json"
	hintName         = "_last_checkpoint"
	seqDigits        = 20
)

func commitKey(seq int64) string     { return fmt.Sprintf("%0*d%s", seqDigits, seq, commitSuffix) }
func checkpointKey(seq int64) string { return fmt.Sprintf("%0*d%s", seqDigits, seq, checkpointSuffix) }

// parseLogName reads a name built by commitKey or checkpointKey. Anything
// else in the directory (the hint, a probe, a stranger's file) is not ok.
func parseLogName(name string) (seq int64, checkpoint, ok bool) {
	digits, checkpoint := strings.CutSuffix(name, checkpointSuffix)
	if !checkpoint {
		var isCommit bool
		if digits, isCommit = strings.CutSuffix(name, commitSuffix); !isCommit {
			return 0, false, false
		}
	}
	if len(digits) != seqDigits || strings.Trim(digits, "0123456789") != "" {
		return 0, false, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || seq < 1 {
		return 0, false, false
	}
	return seq, checkpoint, true
}

// Listing is what one listing of a model's _manifests/ shows: the whole
// directory, or (see listTail) the part after a known commit.
type Listing struct {
	// First is the lowest seq the listing covers: 1 for the whole log.
	First       int64
	Commits     []int64 // ascending
	Checkpoints []int64 // ascending
	Hint        bool    // _last_checkpoint exists
	// attrs are the listed attributes of the commits and checkpoints, by
	// name, which a Log's cache compares with those it folded (see cache.go).
	attrs map[string]objstore.Attrs
}

// List lists the whole log. Stores list in pages (S3: 1000 keys), so the
// cost grows with the length of the log, one request per thousand commits
// and checkpoints; readers of the state list its tail only (see
// readHead). A head found by probing seq+1 until a read fails would take
// the first missing commit for the end.
func (l *Log) List(ctx context.Context) (*Listing, error) {
	ls := &Listing{First: 1}
	err := l.bucket.List(ctx, l.Key("_manifests")+"/", func(a objstore.Attrs) error {
		ls.add(path.Base(a.Key), a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the log: %w", err)
	}
	ls.sort()
	return ls, nil
}

// add records one name of the log's directory, listed with attributes a.
func (ls *Listing) add(name string, a objstore.Attrs) {
	if name == hintName {
		ls.Hint = true
		return
	}
	seq, checkpoint, ok := parseLogName(name)
	if !ok {
		return
	}
	if checkpoint {
		ls.Checkpoints = append(ls.Checkpoints, seq)
	} else {
		ls.Commits = append(ls.Commits, seq)
	}
	if ls.attrs == nil {
		ls.attrs = make(map[string]objstore.Attrs)
	}
	ls.attrs[name] = a
}

// sort puts the seqs in order. Lexical order is seq order for names of
// equal length; sorting again keeps the gap check right whatever a
// backend's order.
func (ls *Listing) sort() {
	slices.Sort(ls.Commits)
	ls.Checkpoints = slices.Compact(slices.Sorted(slices.Values(ls.Checkpoints)))
}

// Gap returns the first missing seq and the evidence that it once existed:
// the next commit, or a state checkpoint that folds past the last commit.
// missing is 0 when the log is whole.
func (ls *Listing) Gap() (missing int64, evidence string) {
	first := max(ls.First, 1)
	for i, seq := range ls.Commits {
		if want := first + int64(i); seq != want {
			return want, fmt.Sprintf("commit %d exists", seq)
		}
	}
	last := first + int64(len(ls.Commits)) - 1
	if n := len(ls.Checkpoints); n > 0 && ls.Checkpoints[n-1] > last {
		return last + 1, fmt.Sprintf("state checkpoint %d folds the log up to there", ls.Checkpoints[n-1])
	}
	return 0, ""
}

// Head returns the newest commit's seq (0 for an empty log), or ErrGap.
func (ls *Listing) Head() (int64, error) {
	if missing, evidence := ls.Gap(); missing > 0 {
		return 0, gapError(missing, evidence)
	}
	return max(ls.First, 1) + int64(len(ls.Commits)) - 1, nil
}

func gapError(missing int64, evidence string) error {
	return fmt.Errorf("%w: commit %d is missing, yet %s: restore it from a copy of the lake; nothing is written to the model until then (highwater verify checks the rest)", ErrGap, missing, evidence)
}

// Head returns the newest commit's seq, or ErrGap. It lists the tail of
// the log after a proven state checkpoint (see readHead).
func (l *Log) Head(ctx context.Context) (int64, error) {
	head, _, _, err := l.readHead(ctx)
	return head, err
}

// ListModels finds the models in b by their logs: a model is a prefix
// whose _manifests/ holds a commit or a state checkpoint. Sorted.
func ListModels(ctx context.Context, b objstore.Bucket) ([]string, error) {
	seen := map[string]bool{}
	err := b.List(ctx, "", func(a objstore.Attrs) error {
		dir, name := path.Split(a.Key)
		model, ok := strings.CutSuffix(dir, "/_manifests/")
		if _, _, isLog := parseLogName(name); ok && isLog && model != "" {
			seen[model] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	models := slices.Collect(maps.Keys(seen))
	slices.Sort(models)
	return models, nil
}
