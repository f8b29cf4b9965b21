package iceberg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/manifest"
)

// Expire drops from the view every snapshot that could name one of the
// files about to be deleted (doomed, relative to the model's root), and
// every snapshot older than before: vacuum calls it before it deletes
// anything, so that no live snapshot ever names a missing file. The view
// must stand at st, the state that decided the deletions (Sync first): its
// current snapshot is st's committed set, which names no removed file, and
// is never expired. A snapshot at seq s names a file removed at seq r only
// if s < r, so every snapshot below the newest removal among doomed goes.
// It returns the number of snapshots expired.
//
// Expiring only edits the metadata: the old metadata versions stay until
// Clean deletes those no longer retained, and a reader that time-travels
// through one of them may find files gone, as with any Iceberg table whose
// snapshots expired.
func (v *View) Expire(ctx context.Context, st *manifest.State, doomed []string, before time.Time) (int, error) {
	for {
		cur, err := v.current(ctx)
		if err != nil {
			return 0, err
		}
		ids, err := v.expirable(ctx, cur, st, doomed, before)
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		c := &committer{v: v, base: cur.version}
		id := cur.tbl.CurrentSnapshot().SnapshotID
		_, _, err = c.CommitTable(ctx, nil,
			[]table.Requirement{table.AssertRefSnapshotID(table.MainBranch, &id)},
			[]table.Update{table.NewRemoveSnapshotsUpdate(ids, false)})
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("expire %d Iceberg snapshots of %s: %w", len(ids), v.log.Model(), err)
		}
		return len(ids), nil
	}
}

// expirable is the snapshots of cur that Expire drops: see Expire.
func (v *View) expirable(ctx context.Context, cur current, st *manifest.State, doomed []string, before time.Time) ([]int64, error) {
	var below int64
	for _, k := range doomed {
		if rm, ok := st.Removed[k]; ok {
			below = max(below, rm.Seq)
		}
	}
	lg, err := v.lag(ctx, cur, st, markOf(st))
	if err != nil {
		return nil, err
	}
	if lg.covered < st.Seq {
		return nil, fmt.Errorf("the Iceberg view of %s stands at seq %d, behind seq %d: sync it before expiring", v.log.Model(), lg.covered, st.Seq)
	}
	head := cur.tbl.CurrentSnapshot()
	var ids []int64
	for _, s := range cur.tbl.Metadata().Snapshots() {
		if s.SnapshotID == head.SnapshotID {
			continue
		}
		seq, _ := snapshotSeq(&s)
		if seq < below || time.UnixMilli(s.TimestampMs).Before(before) {
			ids = append(ids, s.SnapshotID)
		}
	}
	return ids, nil
}
