package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/manifest"
)

// Keys of a snapshot's summary that tie it to the log.
const (
	SummarySeq      = "highwater.seq"
	SummaryCommitID = "highwater.commit-id"
	SummaryKind     = "highwater.kind"
	// SummaryWatermark is the watermark after the commit, when it has one.
	SummaryWatermark = "highwater.watermark"
)

// Result says what a sync did.
type Result struct {
	// From is the seq the view stood at before (0: no view), To the seq
	// it stands at after.
	From, To int64
	// Published counts the metadata versions this sync wrote; Lost those
	// it meant to write but another writer published first.
	Published, Lost int
	// Version is the newest metadata version, MetadataURL its URL.
	Version     int
	MetadataURL string
}

// Sync brings the view up to head, the state of the log as the caller
// read it (nil: read it now). A view that does not exist gets one snapshot
// of head's committed set; a view that lags gets one snapshot per commit it
// lacks that changes the table (its files or its schema): a commit that
// changes neither, such as an export that found no row, makes no snapshot,
// so that it costs the view no write. A view that shows head already costs
// three reads (the hint, a look for a newer version, the metadata), however
// long the log. A sync racing another one loses a version now and then,
// reads the new head of the view and goes on from there: between them,
// every commit is published once.
func (v *View) Sync(ctx context.Context, head *manifest.State) (*Result, error) {
	if head == nil {
		var err error
		if head, err = v.log.ReadState(ctx); err != nil {
			return nil, fmt.Errorf("read the state of %s: %w", v.log.Model(), err)
		}
	}
	want := markOf(head)
	res := &Result{From: -1}
	for {
		cur, err := v.current(ctx)
		if err != nil {
			return nil, err
		}
		lg, err := v.lag(ctx, cur, head, want)
		if err != nil {
			return nil, err
		}
		if res.From < 0 {
			res.From = lg.covered
		}
		res.To, res.Version, res.MetadataURL = lg.covered, cur.version, v.MetadataURL(cur.version)
		if lg.covered >= head.Seq {
			return res, nil
		}
		err = v.advance(ctx, cur, lg, head, res)
		if errors.Is(err, ErrConflict) {
			res.Lost++
			continue // another writer published first: look again
		}
		if err != nil {
			return nil, err
		}
	}
}

// lag is what a view lacks of the log's head.
type lag struct {
	// covered is the newest seq whose table the view shows (0: none).
	covered int64
	// pending are the commits after covered, oldest first, and marks
	// their marks.
	pending []*manifest.Commit
	marks   []mark
	// matched: covered was found by the current snapshot's mark, not by
	// its seq alone (a view whose mark is missing, or wrong).
	matched bool
}

// lag finds what the view cur lacks of head, whose mark is want. A view
// whose current snapshot shows want lacks nothing, which costs no read.
// Otherwise it steps back from head, a commit at a time, until the table
// is the one the current snapshot shows, and at the latest at the
// snapshot's seq: it reads only the commits the view lacks.
func (v *View) lag(ctx context.Context, cur current, head *manifest.State, want mark) (*lag, error) {
	if cur.tbl == nil || cur.tbl.CurrentSnapshot() == nil {
		return &lag{}, nil
	}
	snap := cur.tbl.CurrentSnapshot()
	if snap.Summary != nil && want.is(snap.Summary.Properties) {
		return &lag{covered: max(head.Seq, snapshotSeqOf(snap)), matched: true}, nil
	}
	pos, err := v.position(ctx, cur)
	if err != nil {
		return nil, err
	}
	lg := &lag{covered: pos}
	if pos >= head.Seq {
		// The view is at head, or ahead of the state the caller read.
		return lg, nil
	}
	m := want
	seq := head.Seq
	for ; seq > pos; seq-- {
		if m.is(snap.Summary.Properties) {
			lg.matched = true
			break
		}
		c, err := v.log.ReadCommit(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("read commit %d of %s: %w", seq, v.log.Model(), err)
		}
		lg.pending = append(lg.pending, c)
		lg.marks = append(lg.marks, m)
		m = m.undo(head, c)
	}
	lg.covered = seq
	slices.Reverse(lg.pending)
	slices.Reverse(lg.marks)
	return lg, nil
}

// position is the seq of the view's current snapshot; 0 without one.
func (v *View) position(ctx context.Context, cur current) (int64, error) {
	if cur.tbl == nil {
		return 0, nil
	}
	snap := cur.tbl.CurrentSnapshot()
	if snap == nil {
		return 0, nil
	}
	seq, props := snapshotSeq(snap)
	if seq < 1 {
		return 0, fmt.Errorf("the current snapshot of %s names no highwater seq: was the table written by another tool?", v.MetadataURL(cur.version))
	}
	c, err := v.log.ReadCommit(ctx, seq)
	if err != nil {
		return 0, fmt.Errorf("read the commit of the view's seq %d: %w", seq, err)
	}
	if c.CommitID != props[SummaryCommitID] {
		return 0, fmt.Errorf("the Iceberg view of %s stands at seq %d of another log (commit %s, the log has %s): delete %s and sync again to rebuild it",
			v.log.Model(), seq, props[SummaryCommitID], c.CommitID, v.root+"/"+metadataDir)
	}
	return seq, nil
}

// snapshotSeq is the highwater seq that a snapshot's summary records, 0
// when it records none, and the summary's properties.
func snapshotSeq(snap *table.Snapshot) (int64, iceberg.Properties) {
	if snap.Summary == nil {
		return 0, nil
	}
	seq, err := strconv.ParseInt(snap.Summary.Properties[SummarySeq], 10, 64)
	if err != nil {
		return 0, snap.Summary.Properties
	}
	return seq, snap.Summary.Properties
}

func snapshotSeqOf(snap *table.Snapshot) int64 {
	seq, _ := snapshotSeq(snap)
	return seq
}

// advance publishes what the view lacks, one version at a time: a snapshot
// for each pending commit that changes the table. A view whose mark did not
// match (missing or wrong) also gets one for the last commit, so that its
// current snapshot carries head's mark and the next sync reads no commit.
func (v *View) advance(ctx context.Context, cur current, lg *lag, head *manifest.State, res *Result) error {
	tbl := cur.tbl
	if tbl == nil {
		t, err := v.create(ctx, head)
		if err != nil {
			return err
		}
		tbl = t
		res.Published++
	}
	if tbl.CurrentSnapshot() == nil {
		if _, err := v.bootstrap(ctx, tbl, head); err != nil {
			return err
		}
		res.Published++
		return nil
	}
	published := false
	for i, c := range lg.pending {
		last := i == len(lg.pending)-1
		if !changes(head, c) && (!last || lg.matched || published) {
			continue
		}
		var err error
		if tbl, err = v.publishCommit(ctx, tbl, c, lg.marks[i]); err != nil {
			return err
		}
		published = true
		res.Published++
	}
	return nil
}

// create publishes version 1: the schema and properties, no snapshot.
func (v *View) create(ctx context.Context, head *manifest.State) (*table.Table, error) {
	if head.Schema == nil {
		return nil, fmt.Errorf("the log of %s has no schema yet", v.log.Model())
	}
	sc, err := newSchema(head.Schema.Fields)
	if err != nil {
		return nil, err
	}
	// NewMetadata assigns fresh field ids (depth first), so the name
	// mapping is made from the schema it returns.
	props := tableProperties()
	meta, err := table.NewMetadata(sc, iceberg.UnpartitionedSpec, table.UnsortedSortOrder, v.root, props)
	if err != nil {
		return nil, fmt.Errorf("build Iceberg metadata: %w", err)
	}
	if props[table.DefaultNameMappingKey], err = nameMapping(meta.CurrentSchema()); err != nil {
		return nil, err
	}
	meta, err = table.NewMetadataWithUUID(sc, iceberg.UnpartitionedSpec, table.UnsortedSortOrder, v.root, props, meta.TableUUID())
	if err != nil {
		return nil, fmt.Errorf("build Iceberg metadata: %w", err)
	}
	if err := v.publish(ctx, meta, 1); err != nil {
		return nil, err
	}
	return v.table(ctx, meta, 1), nil
}

// bootstrap is the first snapshot: head's whole committed set.
func (v *View) bootstrap(ctx context.Context, tbl *table.Table, head *manifest.State) (*table.Table, error) {
	c, err := v.log.ReadCommit(ctx, head.Seq)
	if err != nil {
		return nil, fmt.Errorf("read commit %d of %s: %w", head.Seq, v.log.Model(), err)
	}
	tx := newTxn(ctx, tbl)
	if err := upgrade(tx.Transaction, tbl); err != nil {
		return nil, err
	}
	if err := v.evolve(tx.Transaction, tbl, head.Schema, true); err != nil {
		return nil, err
	}
	props := summary(c)
	markOf(head).put(props)
	props["highwater.bootstrap"] = "true"
	files, err := v.dataFiles(head.Files, boundsOf(tx.Transaction, head.Identity))
	if err != nil {
		return nil, err
	}
	if err := addFiles(ctx, tx.Transaction, files, props); err != nil {
		return nil, err
	}
	return tx.commit(ctx, head.Seq)
}

// publishCommit makes commit c, whose mark is m, the next snapshot of tbl.
func (v *View) publishCommit(ctx context.Context, tbl *table.Table, c *manifest.Commit, m mark) (*table.Table, error) {
	tx := newTxn(ctx, tbl)
	if err := upgrade(tx.Transaction, tbl); err != nil {
		return nil, err
	}
	if err := v.evolve(tx.Transaction, tbl, c.Schema, c.Kind == manifest.KindFullRefresh); err != nil {
		return nil, fmt.Errorf("seq %d: %w", c.Seq, err)
	}
	props := summary(c)
	m.put(props)
	adds, err := v.dataFiles(c.Added, boundsOf(tx.Transaction, &c.Identity))
	if err != nil {
		return nil, err
	}
	if len(c.Removed) == 0 {
		if err := addFiles(ctx, tx.Transaction, adds, props); err != nil {
			return nil, fmt.Errorf("seq %d: %w", c.Seq, err)
		}
		return tx.commit(ctx, c.Seq)
	}
	dels := make([]iceberg.DataFile, 0, len(c.Removed))
	for _, k := range c.Removed {
		df, err := v.dataFile(manifest.File{Key: k}, bounds{})
		if err != nil {
			return nil, err
		}
		dels = append(dels, df)
	}
	// A full refresh, a dedupe and a reconcile repair replace files in one
	// snapshot. iceberg-go offers the "replace" operation only to its own
	// rewrites, so the snapshot is an "overwrite", which every engine
	// reads as a change of data: right for a full refresh, conservative
	// for a dedupe.
	if err := tx.ReplaceDataFilesWithDataFiles(ctx, dels, adds, props, table.WithoutAutoNameMapping()); err != nil {
		return nil, fmt.Errorf("seq %d: replace %d files with %d: %w", c.Seq, len(dels), len(adds), err)
	}
	return tx.commit(ctx, c.Seq)
}

func addFiles(ctx context.Context, tx *table.Transaction, files []iceberg.DataFile, props iceberg.Properties) error {
	if len(files) == 0 {
		// An empty append still makes a snapshot, which carries the seq.
		return tx.AddFiles(ctx, nil, props, true)
	}
	// The log already refuses a file committed twice, so iceberg-go's check
	// (which reads every manifest) would only cost time.
	return tx.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck(), table.WithoutAutoNameMapping())
}

// txn is a transaction on a table of the view, and where it writes.
// iceberg-go may write a manifest that its snapshot does not name (an
// append that merges writes the new files' manifest, then the merged one):
// no version will ever name it, so commit deletes it, which only this
// writer can know.
type txn struct {
	*table.Transaction
	bio  *bucketIO
	from int // bio's writes before the transaction's
}

func newTxn(ctx context.Context, tbl *table.Table) *txn {
	tx := &txn{Transaction: tbl.NewTransaction()}
	if fsys, err := tbl.FS(ctx); err == nil {
		if tx.bio, _ = fsys.(*bucketIO); tx.bio != nil {
			tx.from = tx.bio.writes()
		}
	}
	return tx
}

// commit publishes tx as the snapshot of seq.
func (tx *txn) commit(ctx context.Context, seq int64) (*table.Table, error) {
	t, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("publish seq %d as an Iceberg snapshot: %w", seq, err)
	}
	if tx.bio != nil {
		removeUnnamed(t.CurrentSnapshot(), tx.bio, tx.bio.written(tx.from))
	}
	return t, nil
}

// removeUnnamed deletes those of created that snap does not name. It is
// only tidying: a file it fails to delete stays, named by nothing.
func removeUnnamed(snap *table.Snapshot, bio *bucketIO, created []string) {
	if snap == nil || len(created) == 0 {
		return
	}
	named := map[string]bool{snap.ManifestList: true}
	mans, err := snap.Manifests(bio)
	if err != nil {
		return
	}
	for _, m := range mans {
		named[m.FilePath()] = true
	}
	for _, name := range created {
		if !named[name] {
			_ = bio.Remove(name)
		}
	}
}

// evolve stages the schema change that sc needs, and the name mapping that
// goes with it.
func (v *View) evolve(tx *table.Transaction, tbl *table.Table, sc *manifest.Schema, fullRefresh bool) error {
	if sc == nil {
		return nil
	}
	changed, err := evolveSchema(tx, tbl.Schema(), sc.Fields, fullRefresh)
	if err != nil || !changed {
		return err
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return fmt.Errorf("stage the schema change: %w", err)
	}
	nm, err := nameMapping(staged.Schema())
	if err != nil {
		return err
	}
	return tx.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: nm})
}

// nameMapping is the schema.name-mapping.default of sc: highwater's files
// carry no Parquet field ids, so readers map their columns by name. Iceberg
// keeps a column's id for its life, and the mapping holds every id's name.
func nameMapping(sc *iceberg.Schema) (string, error) {
	b, err := json.Marshal(sc.NameMapping())
	if err != nil {
		return "", fmt.Errorf("encode the name mapping: %w", err)
	}
	return string(b), nil
}

func summary(c *manifest.Commit) iceberg.Properties {
	p := iceberg.Properties{
		SummarySeq:      strconv.FormatInt(c.Seq, 10),
		SummaryCommitID: c.CommitID,
		SummaryKind:     c.Kind,
	}
	if c.Watermark != nil {
		p[SummaryWatermark] = *c.Watermark
	}
	return p
}

func (v *View) dataFiles(fs []manifest.File, b bounds) ([]iceberg.DataFile, error) {
	out := make([]iceberg.DataFile, 0, len(fs))
	for _, f := range fs {
		df, err := v.dataFile(f, b)
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	return out, nil
}

// dataFile describes a committed file from what the log recorded when it
// was written: no file is read again.
func (v *View) dataFile(f manifest.File, bs bounds) (iceberg.DataFile, error) {
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, v.root+"/"+f.Key,
		iceberg.ParquetFile, nil, nil, nil, f.Rows, f.Bytes)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", f.Key, err)
	}
	if lo, hi, ok := bs.of(f); ok {
		b.LowerBoundValues(map[int][]byte{bs.id: lo}).UpperBoundValues(map[int][]byte{bs.id: hi})
	}
	return b.Build(), nil
}
