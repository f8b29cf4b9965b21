package manifest

import (
	"context"
	"errors"
	"fmt"
)

// The ways a planned run can no longer commit.
var (
	// ErrAbandoned: a vacuum declared the run dead, so that it could delete
	// its files.
	ErrAbandoned = errors.New("the run was declared abandoned")
	// ErrCommitted: another attempt of the run committed it.
	ErrCommitted = errors.New("the run is already committed")
	// ErrSuperseded: a commit since the run's plan makes it stale, e.g.
	// another export moved the watermark past the plan's base.
	ErrSuperseded = errors.New("the log moved past the run's plan")
)

// Kills reports whether commit c, landing after a plan of kind planKind was
// made, means that plan can never commit. This is the one statement of the
// rule; exports, dedupes and vacuums all ask it.
//
//   - An export or a full refresh planned its interval from the watermark
//     at its base: any commit that moves the watermark makes it stale.
//   - A dedupe rewrote the files committed at its base: a commit that
//     removes files (another dedupe, a full refresh) may have removed its
//     inputs or replaced them.
//   - A backfill, or a reconcile's repair, adds to the files at its base:
//     a full refresh replaces them, and the added rows would come back on
//     top of it.
func Kills(planKind string, c *Commit) bool {
	switch planKind {
	case KindExport, KindFullRefresh:
		return MovesWatermark(c.Kind)
	case KindDedupe:
		return len(c.Removed) > 0 || c.Kind == KindDedupe || c.Kind == KindFullRefresh
	case KindBackfill, KindReconcile:
		return c.Kind == KindFullRefresh
	}
	return false
}

// Live says whether plan p can still commit on top of st: nil, or an error
// wrapping ErrAbandoned, ErrCommitted or ErrSuperseded that names the seq
// responsible.
func (l *Log) Live(ctx context.Context, st *State, p *Plan) error {
	if err := st.Ended(p.RunID); err != nil {
		return err
	}
	// The state knows the last watermark move, so the common case reads no
	// commit; the others read those since the plan's base.
	if MovesWatermark(p.Kind) {
		if st.LastWatermarkSeq > p.BaseSeq {
			return fmt.Errorf("run %s, planned on seq %d: %w: seq %d moved the watermark",
				p.RunID, p.BaseSeq, ErrSuperseded, st.LastWatermarkSeq)
		}
		return nil
	}
	for seq := p.BaseSeq + 1; seq <= st.Seq; seq++ {
		c, err := l.ReadCommit(ctx, seq)
		if err != nil {
			return err
		}
		// The run's own commit, which Ended finds until a vacuum forgets
		// the run: a backfill's or a repair's does not kill its kind.
		if c.RunID == p.RunID {
			return fmt.Errorf("run %s: %w at seq %d", p.RunID, ErrCommitted, seq)
		}
		if Kills(p.Kind, c) {
			return fmt.Errorf("run %s, planned on seq %d: %w: seq %d (%s) replaced files",
				p.RunID, p.BaseSeq, ErrSuperseded, seq, c.Kind)
		}
	}
	return nil
}

// Ended says whether the run is over whatever its plan: nil, or an error
// wrapping ErrAbandoned or ErrCommitted. It is the part of Live that needs
// no plan, for those who list runs and would rather not read the plans of
// finished ones.
func (s *State) Ended(runID string) error {
	if seq, dead := s.Abandoned[runID]; dead {
		return fmt.Errorf("run %s: %w by the vacuum at seq %d", runID, ErrAbandoned, seq)
	}
	if seq, done := s.Runs[runID]; done {
		return fmt.Errorf("run %s: %w at seq %d", runID, ErrCommitted, seq)
	}
	return nil
}

// Append is the one optimistic commit loop. It reads the head of the log,
// asks build for the commit to append to that state, and writes it at the
// next seq. When another writer took that seq first, it reads the new head
// and asks build again, so build must decide afresh from the state it is
// given (rebase, or give up with an error of its own, which Append returns
// unwrapped; the errors of reading and writing the log are wrapped). It
// returns the commit and the state folded up to it.
func (l *Log) Append(ctx context.Context, build func(*State) (*Commit, error)) (*Commit, *State, error) {
	for {
		st, err := l.ReadState(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("read the state of %s: %w", l.model, err)
		}
		c, err := build(st)
		if err != nil {
			return nil, nil, err
		}
		if l.Failpoint != nil {
			l.Failpoint("append-built")
		}
		err = l.Commit(ctx, st, c)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("commit %s to the log of %s: %w", c.Kind, l.model, err)
		}
		return c, st, nil
	}
}
