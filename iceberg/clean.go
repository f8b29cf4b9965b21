package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// Clean deletes the metadata of the view that no retained version names:
// the metadata versions that are no longer retained, and the manifest lists
// and manifests that only they name. Vacuum calls it after Expire has
// published, so that the expired snapshots' files go too.
//
// The newest version is retained, and so is an older one while its current
// snapshot is still live in the newest (so that it still reads: vacuum
// deletes only files that no live snapshot names) and while it is among the
// newest write.metadata.previous-versions-max versions or was superseded
// after before (the retention), so that a catalog entry or an engine that
// lags by less than the retention never names a missing file. A file that
// a retained version names is never deleted, whatever else names it.
//
// What to delete is found from the metadata versions that go, never by
// listing metadata/, so that the manifests a racing writer has written but
// not yet published are never taken for orphans. It returns the keys it
// deleted, relative to the model's root.
func (v *View) Clean(ctx context.Context, before time.Time) ([]string, error) {
	cur, err := v.current(ctx)
	if err != nil || cur.tbl == nil {
		return nil, err
	}
	p, err := v.cleanPlan(ctx, cur.tbl.Metadata(), cur.version, before)
	if err != nil {
		return nil, err
	}
	var deleted []string
	// Manifests first, then the versions that named them (the plan's
	// order): a clean that stops part way leaves versions that the next
	// one finds again.
	for _, k := range p {
		err := v.log.Bucket().Delete(ctx, v.log.Key(k))
		if err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return deleted, fmt.Errorf("delete %s: %w", k, err)
		}
		deleted = append(deleted, k)
	}
	return deleted, nil
}

// Vacuumable lists, without changing anything, the metadata that a vacuum
// deciding on st to delete the files doomed would delete: the Expire that
// precedes the deletions (with doomed) and the one at the end (without)
// publish one version that drops the snapshots expirable finds, and Clean
// then deletes what cleanPlan finds with that version the newest. The
// view must stand at st, as Expire requires. It is the dry run's list,
// in Clean's order, relative to the model's root.
func (v *View) Vacuumable(ctx context.Context, st *manifest.State, doomed []string, before time.Time) ([]string, error) {
	cur, err := v.current(ctx)
	if err != nil || cur.tbl == nil {
		return nil, err
	}
	ids, err := v.expirable(ctx, cur, st, doomed, before)
	if err != nil {
		return nil, err
	}
	newest, n := cur.tbl.Metadata(), cur.version
	if len(ids) > 0 {
		// As the committer applies Expire's update to the current version.
		m, err := table.UpdateTableMetadata(newest, []table.Update{table.NewRemoveSnapshotsUpdate(ids, false)}, v.MetadataURL(n))
		if err != nil {
			return nil, fmt.Errorf("apply the Iceberg updates: %w", err)
		}
		if m, err = trimSnapshots(m); err != nil {
			return nil, err
		}
		newest, n = m, n+1
	}
	return v.cleanPlan(ctx, newest, n, before)
}

// cleanPlan is what Clean deletes when newest, version n, is the newest
// version: the manifest lists and manifests that only the versions no
// longer retained name, then those versions, as keys relative to the
// model's root. Version n need not be written yet: Vacuumable plans with
// the one Expire would publish.
func (v *View) cleanPlan(ctx context.Context, newest table.Metadata, n int, before time.Time) ([]string, error) {
	live := map[int64]bool{}
	for _, s := range newest.Snapshots() {
		live[s.SnapshotID] = true
	}
	window := map[string]bool{}
	for e := range newest.PreviousFiles() {
		window[e.MetadataFile] = true
	}
	written, err := v.versions(ctx)
	if err != nil {
		return nil, err
	}
	kept := []table.Metadata{newest}
	var dropped []int
	var droppedMeta []table.Metadata
	for _, k := range slices.Sorted(maps.Keys(written)) {
		if k >= n {
			continue // the newest, and any a racing writer published since
		}
		tbl, err := v.load(ctx, k)
		if err != nil {
			return nil, err
		}
		m := tbl.Metadata()
		// Version k stopped being the newest when k+1 was written (or
		// is about to be, when k+1 is the planned n).
		superseded, ok := written[k+1]
		recent := !ok || !superseded.Before(before)
		snap := m.CurrentSnapshot()
		if (snap == nil || live[snap.SnapshotID]) && (window[v.MetadataURL(k)] || recent) {
			kept = append(kept, m)
			continue
		}
		dropped = append(dropped, k)
		droppedMeta = append(droppedMeta, m)
	}

	fsys := v.fs(ctx)
	named := map[string]bool{} // the manifest lists and manifests that a retained version names
	for _, m := range kept {
		if err := namedBy(m, fsys, named, func(string) bool { return false }); err != nil {
			return nil, err
		}
	}
	doomed := map[string]bool{}
	for _, m := range droppedMeta {
		if err := namedBy(m, fsys, doomed, func(p string) bool { return named[p] }); err != nil {
			return nil, err
		}
	}
	var plan []string
	add := func(url string) {
		k, err := fsys.key(url)
		if err != nil {
			return // not under the table's location: not highwater's to delete
		}
		plan = append(plan, k[len(v.log.Key())+1:])
	}
	for _, p := range slices.Sorted(maps.Keys(doomed)) {
		if !named[p] {
			add(p)
		}
	}
	for _, k := range dropped {
		add(v.MetadataURL(k))
	}
	return plan, nil
}

// namedBy adds to into the manifest lists of m's snapshots and the
// manifests they name, skipping the lists that skip says are accounted
// for. A list already gone (a clean that stopped part way) names nothing.
func namedBy(m table.Metadata, fsys *bucketIO, into map[string]bool, skip func(string) bool) error {
	for _, s := range m.Snapshots() {
		if s.ManifestList == "" || into[s.ManifestList] || skip(s.ManifestList) {
			continue
		}
		into[s.ManifestList] = true
		mans, err := s.Manifests(fsys)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the manifest list of snapshot %d: %w", s.SnapshotID, err)
		}
		for _, mf := range mans {
			into[mf.FilePath()] = true
		}
	}
	return nil
}

// versions lists the metadata versions written, with the time each was.
func (v *View) versions(ctx context.Context) (map[int]time.Time, error) {
	out := map[int]time.Time{}
	err := v.log.Bucket().List(ctx, v.key()+"/v", func(a objstore.Attrs) error {
		if n, ok := parseMetadataName(path.Base(a.Key)); ok {
			out[n] = a.ModTime
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the Iceberg metadata: %w", err)
	}
	return out, nil
}
