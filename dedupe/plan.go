package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// work is what one round rewrites.
type work struct {
	base   *manifest.State
	layout Layout
	full   bool
	// fresh are the unbucketed files (all files on a full rewrite), in
	// committed order; bucketed are the bucket files by bucket.
	fresh    []manifest.File
	bucketed map[int][]manifest.File
	order    map[string]int // committed position of every file
	floor    *int64         // tombstones older than this are dropped
	modKind  watermark.Kind
}

// plan decides what the round rewrites on top of the state st: every
// committed file into a new layout, or the unbucketed files and the
// buckets they touch. A nil work says there is nothing to do, and why.
func (r *runner) plan(ctx context.Context, st *manifest.State) (*work, string, error) {
	if st.Seq == 0 || st.Identity == nil {
		return nil, "", fmt.Errorf("dedupe %s: %w", r.opts.Model, ErrNoState)
	}
	if len(st.Files) == 0 {
		return nil, "the committed set is empty", nil
	}
	w := &work{base: st, bucketed: map[int][]manifest.File{}, order: map[string]int{}}
	var total int64
	for i, f := range st.Files {
		w.order[f.Key] = i
		total += f.Bytes
	}
	layout, ok, err := committedLayout(st)
	if err != nil {
		return nil, "", err
	}
	if ok {
		for _, f := range st.Files {
			if f.Bucket != nil && *f.Bucket >= layout.Buckets {
				ok = false // files of another layout: start afresh
			}
		}
	}
	if ok && int64(layout.Buckets) < maxBuckets && total/int64(layout.Buckets) > relayoutFactor*r.opts.TargetFileBytes {
		r.logger.Info("buckets outgrew the target file size; rewriting into a new layout", "buckets", layout.Buckets, "bytes", total)
		ok = false
	}
	if !ok {
		n := r.opts.Buckets
		if n == 0 {
			n = chooseBuckets(total, r.opts.TargetFileBytes, r.workers())
		}
		w.layout, w.full, w.fresh = Layout{Scheme: layoutScheme, Hash: layoutHash, Buckets: n}, true, st.Files
	} else {
		w.layout = layout
		for _, f := range st.Files {
			if f.Bucket == nil {
				w.fresh = append(w.fresh, f)
			} else {
				w.bucketed[*f.Bucket] = append(w.bucketed[*f.Bucket], f)
			}
		}
		if len(w.fresh) == 0 {
			return nil, fmt.Sprintf("nothing was committed since the last dedupe (seq %d): every file is in its bucket", st.Seq), nil
		}
	}
	if w.modKind, err = st.ModifiedAtKind(); err != nil {
		return nil, "", err
	}
	if w.floor, err = r.tombstoneFloor(ctx, st, w.modKind); err != nil {
		return nil, "", err
	}
	return w, "", nil
}

// tombstoneFloor is the modified-at under which a winning tombstone is
// dropped, or nil when every tombstone is kept.
func (r *runner) tombstoneFloor(ctx context.Context, st *manifest.State, kind watermark.Kind) (*int64, error) {
	if r.opts.KeepTombstones || st.Watermark == nil {
		return nil, nil
	}
	lookback, err := r.lookback(ctx, st)
	if err != nil {
		return nil, err
	}
	wm, err := watermark.Parse(kind, *st.Watermark)
	if err != nil {
		return nil, fmt.Errorf("read the committed watermark %q: %w", *st.Watermark, err)
	}
	floor := wm.Sub(kind, lookback)
	// A stuck transaction can hold the next run's from below the
	// lookback: its rows could still bring older versions, so an
	// unreadable floor must not drop their tombstones.
	if st.FromFloor != nil {
		ff, err := watermark.Parse(kind, *st.FromFloor)
		if err != nil {
			return nil, fmt.Errorf("read the committed watermark %q: %w", *st.FromFloor, err)
		}
		floor = min(floor, ff)
	}
	f := int64(floor)
	return &f, nil
}

// lookback is the one the next export will use: the option, else the last
// export plan's, else the default.
func (r *runner) lookback(ctx context.Context, st *manifest.State) (time.Duration, error) {
	if r.opts.Lookback != nil {
		return *r.opts.Lookback, nil
	}
	for run, seq := range st.Runs {
		if seq != st.LastWatermarkSeq {
			continue
		}
		p, err := r.log.ReadPlan(ctx, run)
		if err != nil {
			return 0, fmt.Errorf("read the last export's lookback: %w", err)
		}
		d, err := time.ParseDuration(p.Lookback)
		if err != nil {
			return 0, fmt.Errorf("read the last export's lookback %q: %w", p.Lookback, err)
		}
		return d, nil
	}
	return watermark.DefaultLookback, nil
}
