package manifest

import (
	"context"
	"errors"
	"fmt"

	"github.com/highwater-dev/highwater/watermark"
)

// ErrResetRefused: a reset that would not move the watermark backwards,
// or names no watermark, or gives no reason.
var ErrResetRefused = errors.New("reset refused")

// ErrBackwards: a commit other than a reset would move the watermark
// backwards.
var ErrBackwards = errors.New("the watermark never moves backwards")

// ResetRequest asks for the watermark to move back, to the watermark of
// the commit at ToSeq or to Watermark (one of them).
type ResetRequest struct {
	ToSeq     int64
	Watermark string
	Reason    string
	User      string
	Host      string
}

// PlanReset builds the reset commit that req makes on st, without
// writing it: the new watermark, normalized to the column's literal form,
// must lie below the current one.
func (l *Log) PlanReset(ctx context.Context, st *State, req ResetRequest) (*Commit, error) {
	switch {
	case req.Reason == "":
		return nil, fmt.Errorf("%w: a reset needs a reason", ErrResetRefused)
	case (req.ToSeq == 0) == (req.Watermark == ""):
		return nil, fmt.Errorf("%w: name the new watermark by a seq or by a value, one of them", ErrResetRefused)
	case st.Seq == 0 || st.Identity == nil:
		return nil, fmt.Errorf("%w: the model has no commits", ErrResetRefused)
	case st.Watermark == nil:
		return nil, fmt.Errorf("%w: the model has no watermark yet", ErrResetRefused)
	}
	kind, err := st.ModifiedAtKind()
	if err != nil {
		return nil, err
	}
	lit := req.Watermark
	if req.ToSeq != 0 {
		if req.ToSeq < 0 || req.ToSeq > st.Seq {
			return nil, fmt.Errorf("%w: seq %d is not in the log (1 to %d)", ErrResetRefused, req.ToSeq, st.Seq)
		}
		c, err := l.ReadCommit(ctx, req.ToSeq)
		if err != nil {
			return nil, err
		}
		if c.Watermark == nil {
			return nil, fmt.Errorf("%w: commit %d has no watermark", ErrResetRefused, req.ToSeq)
		}
		lit = *c.Watermark
	}
	v, err := watermark.Parse(kind, lit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w (a %s literal, as status prints watermarks)", ErrResetRefused, err, kind)
	}
	cur, err := watermark.Parse(kind, *st.Watermark)
	if err != nil {
		return nil, fmt.Errorf("read the committed watermark %q: %w", *st.Watermark, err)
	}
	norm := watermark.Format(kind, v)
	if v >= cur {
		return nil, fmt.Errorf("%w: %s is not below the current watermark %s", ErrResetRefused, norm, *st.Watermark)
	}
	return &Commit{Kind: KindReset, Identity: *st.Identity, Watermark: &norm, FromFloor: st.FromFloor,
		Reset: &ResetReport{OldWatermark: st.Watermark, NewWatermark: norm, ToSeq: req.ToSeq, Reason: req.Reason, User: req.User, Host: req.Host}}, nil
}

// Reset commits req: the next export reads from the new watermark minus
// its lookback. No file is removed: the rows it reads again become new
// versions, which dedupe orders by (modified_at, _hw_version).
func (l *Log) Reset(ctx context.Context, req ResetRequest) (*Commit, *State, error) {
	return l.Append(ctx, func(st *State) (*Commit, error) {
		return l.PlanReset(ctx, st, req)
	})
}

// checkForward refuses a commit that would move the watermark backwards,
// unless it is a reset: that is the one kind of commit that may. A
// watermark of another kind (a full refresh after the column changed
// type) orders nothing against the old one.
func checkForward(st *State, c *Commit) error {
	if c.Kind == KindReset || st.Watermark == nil || c.Watermark == nil || *c.Watermark == *st.Watermark || st.Identity == nil {
		return nil
	}
	if c.Identity.ModifiedAtKind != "" && st.Identity.ModifiedAtKind != "" && c.Identity.ModifiedAtKind != st.Identity.ModifiedAtKind {
		return nil
	}
	kind, err := st.ModifiedAtKind()
	if err != nil {
		return nil // a log without a kind (written before it was recorded, and without a schema): its writers checked
	}
	old, err1 := watermark.Parse(kind, *st.Watermark)
	next, err2 := watermark.Parse(kind, *c.Watermark)
	if err1 != nil || err2 != nil {
		return nil // the writer that read them refused what it could not read
	}
	if next < old {
		return fmt.Errorf("commit %s with watermark %s below %s: %w (only a reset moves it back)", c.Kind, *c.Watermark, *st.Watermark, ErrBackwards)
	}
	return nil
}
