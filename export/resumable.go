package export

import (
	"time"

	"github.com/highwater-dev/highwater/manifest"
)

// clockSkew is how far apart the clocks of two machines exporting one
// model may be for resume to still find every unfinished run.
const clockSkew = 10 * time.Minute

// resumableSince bounds the runs that resume lists, so that a no-change
// export costs the same however many runs vacuum has not yet pruned. An
// export or full refresh planned before the newest commit that moved the
// watermark can never commit (manifest.Kills), and a plan made on that
// commit or after was made after the commit's run was planned: its id
// sorts after that run's, give or take the skew of the two clocks. A run
// missed by more skew than that is not lost: it is superseded by the run
// planned instead, as a twin of a crashed run would be. A backfill survives
// watermark moves, so it lists every run. The zero time lists them all.
func resumableSince(st *manifest.State, kind string) time.Time {
	if kind == manifest.KindBackfill || st.LastWatermarkSeq == 0 {
		return time.Time{}
	}
	for run, seq := range st.Runs {
		if seq != st.LastWatermarkSeq {
			continue
		}
		if planned, ok := manifest.RunIDTime(run); ok {
			return planned.Add(-clockSkew)
		}
	}
	return time.Time{}
}
