package manifest

import (
	"context"
	"fmt"
	"path"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// The head of a long log is found without listing all of it. The hint
// names the newest state checkpoint; once that checkpoint proves itself
// (see provenCheckpoint), commit S is known to exist and the state up to
// it is known, so only the keys after the checkpoint are listed: the
// commits from S on, newer checkpoints, and any stray commit far above,
// which still shows a gap. The cost is that of one checkpoint interval
// whatever the log's length, on every store that lists from a start key.
//
// A commit lost below a proven checkpoint is not seen here. The reasons
// a gap stops readers do not hold there: the checkpoint folds the lost
// commit, so the state lacks nothing, and no writer writes below the head.
// Verify and Fold, which fold from commit 1, still report it. A hint that
// is missing, unreadable or names a checkpoint that does not prove itself
// (another history's, a damaged one) is not followed: the whole log is
// listed, as before there were hints.

// readHead finds the head of the log and the state to fold up to it: a
// proven state checkpoint at or below the head, or the empty state. ls is
// the listing it found the head in.
func (l *Log) readHead(ctx context.Context) (head int64, base *State, ls *Listing, err error) {
	ls, base, err = l.listTail(ctx)
	if err != nil {
		return 0, nil, nil, err
	}
	if ls == nil {
		if ls, err = l.List(ctx); err != nil {
			return 0, nil, nil, err
		}
		base = &State{Version: currentVersion()}
	}
	if head, err = ls.Head(); err != nil {
		return 0, nil, nil, err
	}
	return head, l.trustedCheckpoint(ctx, ls, base), ls, nil
}

// listTail lists the log after the checkpoint its hint names, when that
// checkpoint proves itself, and returns the listing and the checkpoint's
// state. A nil listing means the hint cannot be followed.
func (l *Log) listTail(ctx context.Context) (*Listing, *State, error) {
	var h lastCheckpoint
	if err := l.readJSON(ctx, l.Key("_manifests", hintName), &h); err != nil || h.Seq < 1 {
		return nil, nil, nil
	}
	st, err := l.provenCheckpoint(ctx, h.Seq)
	if err != nil {
		return nil, nil, nil
	}
	ls := &Listing{First: h.Seq, Checkpoints: []int64{h.Seq}, Hint: true}
	if err := l.listInto(ctx, ls, checkpointKey(h.Seq)); err != nil {
		return nil, nil, err
	}
	return ls, st, nil
}

// HeadSince returns the head of a log in which commit seq is known to
// exist, listing only the keys after it: one request where nothing moved.
// ErrGap when a commit above seq is missing below a newer one.
func (l *Log) HeadSince(ctx context.Context, seq int64) (int64, error) {
	if seq < 1 {
		return l.Head(ctx)
	}
	ls := &Listing{First: seq + 1}
	if err := l.listInto(ctx, ls, commitKey(seq)); err != nil {
		return 0, err
	}
	return ls.Head()
}

// listInto adds to ls the log's names after the name after.
func (l *Log) listInto(ctx context.Context, ls *Listing, after string) error {
	dir := l.Key("_manifests") + "/"
	err := l.bucket.ListAfter(ctx, dir, dir+after, func(a objstore.Attrs) error {
		ls.add(path.Base(a.Key), a)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the log: %w", err)
	}
	ls.sort()
	return nil
}
