package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// Keys of the view, relative to the model's root.
const (
	metadataDir     = "metadata"
	versionHintName = "version-hint.text"
)

func metadataName(version int) string { return fmt.Sprintf("v%d.metadata.json", version) }

// parseMetadataName is the inverse of metadataName.
func parseMetadataName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "v")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".metadata.json")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// ErrConflict: another writer published the metadata version this one
// meant to write. It wraps table.ErrCommitFailed, as iceberg-go expects.
var ErrConflict = fmt.Errorf("another writer published that Iceberg metadata version first: %w", table.ErrCommitFailed)

// View is a model's Iceberg table: where it lives, and how to reach it.
type View struct {
	log *manifest.Log
	// root is the table's location, the URL of the model's root.
	root string
}

// NewView is the Iceberg view of the model of log, whose root engines read
// at rootURL (e.g. s3://bucket/lake/orders).
func NewView(log *manifest.Log, rootURL string) *View {
	return &View{log: log, root: strings.TrimSuffix(rootURL, "/")}
}

// Location is the table's location.
func (v *View) Location() string { return v.root }

// MetadataURL is the URL of metadata version n.
func (v *View) MetadataURL(n int) string { return v.root + "/" + metadataDir + "/" + metadataName(n) }

func (v *View) key(parts ...string) string {
	return v.log.Key(append([]string{metadataDir}, parts...)...)
}

func (v *View) fs(ctx context.Context) *bucketIO {
	return &bucketIO{ctx: ctx, b: v.log.Bucket(), root: v.root, prefix: v.log.Key()}
}

// current is a published metadata version.
type current struct {
	version int // 0: no table yet
	tbl     *table.Table
}

// Current finds the newest metadata version: the hint's, or the newest
// listed when the hint is missing, then every version after it that
// exists, since a writer publishes its version before it moves the hint.
func (v *View) current(ctx context.Context) (current, error) {
	b := v.log.Bucket()
	n := 0
	raw, err := objstore.ReadAll(ctx, b, v.key(versionHintName))
	switch {
	case err == nil:
		if h, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && h > 0 {
			n = h
		}
	case !errors.Is(err, objstore.ErrNotExist):
		return current{}, fmt.Errorf("read the Iceberg version hint: %w", err)
	}
	if n == 0 {
		if n, err = v.newestListed(ctx); err != nil {
			return current{}, err
		}
	}
	for {
		_, err := b.Stat(ctx, v.key(metadataName(n+1)))
		if errors.Is(err, objstore.ErrNotExist) {
			break
		}
		if err != nil {
			return current{}, fmt.Errorf("look for Iceberg metadata version %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return current{}, nil
	}
	tbl, err := v.load(ctx, n)
	if err != nil {
		return current{}, err
	}
	return current{version: n, tbl: tbl}, nil
}

func (v *View) newestListed(ctx context.Context) (int, error) {
	newest := 0
	err := v.log.Bucket().List(ctx, v.key()+"/v", func(a objstore.Attrs) error {
		if n, ok := parseMetadataName(path.Base(a.Key)); ok && n > newest {
			newest = n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list the Iceberg metadata: %w", err)
	}
	return newest, nil
}

func (v *View) load(ctx context.Context, n int) (*table.Table, error) {
	raw, err := objstore.ReadAll(ctx, v.log.Bucket(), v.key(metadataName(n)))
	if err != nil {
		return nil, fmt.Errorf("read Iceberg metadata version %d: %w", n, err)
	}
	meta, err := table.ParseMetadataBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("parse Iceberg metadata version %d: %w", n, err)
	}
	return v.table(ctx, meta, n), nil
}

func (v *View) table(ctx context.Context, meta table.Metadata, n int) *table.Table {
	fsys := v.fs(ctx)
	return table.New(table.Identifier{v.log.Model()}, meta, v.MetadataURL(n),
		func(context.Context) (iceio.IO, error) { return fsys, nil }, &committer{v: v, base: n})
}

// publish writes meta as version n, create-if-absent, then moves the hint.
func (v *View) publish(ctx context.Context, meta table.Metadata, n int) error {
	raw, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode Iceberg metadata: %w", err)
	}
	err = v.log.Bucket().Put(ctx, v.key(metadataName(n)), bytes.NewReader(raw), objstore.PutOptions{IfNotExist: true, ContentType: "application/json"})
	if errors.Is(err, objstore.ErrExist) {
		return fmt.Errorf("publish Iceberg metadata version %d: %w", n, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("publish Iceberg metadata version %d: %w", n, err)
	}
	return v.writeHint(ctx, n)
}

// writeHint moves version-hint.text to n, then to any newer version that
// was published meanwhile: the last writer to finish looked last, so a slow
// writer never leaves an older hint behind for long. The hint is only a
// hint: current looks past it.
func (v *View) writeHint(ctx context.Context, n int) error {
	b := v.log.Bucket()
	for range 20 {
		if err := b.Put(ctx, v.key(versionHintName), strings.NewReader(strconv.Itoa(n)), objstore.PutOptions{ContentType: "text/plain"}); err != nil {
			return fmt.Errorf("write the Iceberg version hint: %w", err)
		}
		_, err := b.Stat(ctx, v.key(metadataName(n+1)))
		if errors.Is(err, objstore.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look for Iceberg metadata version %d: %w", n+1, err)
		}
		for n++; ; n++ {
			if _, err := b.Stat(ctx, v.key(metadataName(n+1))); err != nil {
				break
			}
		}
	}
	return nil
}

// committer is the catalog that iceberg-go's transactions commit through:
// it applies their updates to version base and publishes base+1. It loads
// nothing newer: a transaction built on an older version must fail, so that
// the sync reads the new head and decides again which commits of the log
// remain to publish (a retry that replays the transaction on a newer base
// would publish a commit twice).
type committer struct {
	v    *View
	base int
}

var _ table.CatalogIO = (*committer)(nil)

func (c *committer) LoadTable(ctx context.Context, _ table.Identifier) (*table.Table, error) {
	return c.v.load(ctx, c.base)
}

func (c *committer) CommitTable(ctx context.Context, _ table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	var base table.Metadata
	if c.base > 0 {
		tbl, err := c.v.load(ctx, c.base)
		if err != nil {
			return nil, "", err
		}
		base = tbl.Metadata()
	}
	// The base is the version the transaction was built on, so a failed
	// requirement is no race (a race shows as ErrConflict on publish).
	for _, r := range reqs {
		if err := r.Validate(base); err != nil {
			return nil, "", fmt.Errorf("check the Iceberg requirements: %w", err)
		}
	}
	loc := ""
	if c.base > 0 {
		loc = c.v.MetadataURL(c.base)
	}
	meta, err := table.UpdateTableMetadata(base, updates, loc)
	if err != nil {
		return nil, "", fmt.Errorf("apply the Iceberg updates: %w", err)
	}
	if meta, err = trimSnapshots(meta); err != nil {
		return nil, "", err
	}
	if err := c.v.publish(ctx, meta, c.base+1); err != nil {
		return nil, "", err
	}
	c.base++
	return meta, c.v.MetadataURL(c.base), nil
}

// keepSnapshots bounds the snapshots a view keeps: every metadata version
// holds all of them, so without a bound each commit would write a bigger
// file (at 500 commits, 400 KB and a no-change export twice as slow).
// Older snapshots are expired as new ones come; expiring deletes nothing,
// it only ends time travel to them.
const keepSnapshots = 100

// trimSnapshots expires the oldest snapshots beyond keepSnapshots.
func trimSnapshots(meta table.Metadata) (table.Metadata, error) {
	snaps := meta.Snapshots()
	if len(snaps) <= keepSnapshots {
		return meta, nil
	}
	cur := meta.CurrentSnapshot()
	slices.SortFunc(snaps, func(a, b table.Snapshot) int { return cmp.Compare(a.SequenceNumber, b.SequenceNumber) })
	var ids []int64
	for _, s := range snaps[:len(snaps)-keepSnapshots] {
		if cur == nil || s.SnapshotID != cur.SnapshotID {
			ids = append(ids, s.SnapshotID)
		}
	}
	out, err := table.UpdateTableMetadata(meta, []table.Update{table.NewRemoveSnapshotsUpdate(ids, false)}, "")
	if err != nil {
		return nil, fmt.Errorf("expire the oldest Iceberg snapshots: %w", err)
	}
	return out, nil
}

// tableProperties are set on every view.
func tableProperties() iceberg.Properties {
	return iceberg.Properties{
		// highwater's files are Parquet, written by highwater; nothing
		// else should write into this table.
		"write.format.default": "parquet",
		"highwater.managed":    "true",
		// The table location also holds the log (_manifests/, _runs/),
		// which no snapshot names: an engine's orphan-file removal or
		// snapshot expiry must not delete it, nor the files highwater's
		// vacuum deletes when their retention allows.
		table.GCEnabledKey: "false",
		// Each metadata version lists the earlier ones; ten are enough to
		// find one's way back.
		"write.metadata.previous-versions-max": "10",
		// Each append writes a manifest; merged once there are
		// mergeManifests of them (iceberg-go packs them into manifests of
		// up to commit.manifest.target-size-bytes, 8 MB), so that
		// planning a scan of the current snapshot reads a bounded number
		// of manifests however many commits the table has had.
		table.ManifestMergeEnabledKey:  "true",
		table.ManifestMinMergeCountKey: strconv.Itoa(mergeManifests),
	}
}

// mergeManifests is the number of manifests past which an append merges
// them: a merge reads and rewrites them, so a smaller number makes appends
// dearer and scans cheaper.
const mergeManifests = 10

// upgrade stages the table properties that tbl lacks, such as those an
// earlier highwater did not set.
func upgrade(tx *table.Transaction, tbl *table.Table) error {
	have := tbl.Properties()
	missing := iceberg.Properties{}
	for k, v := range tableProperties() {
		if have[k] != v {
			missing[k] = v
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := tx.SetProperties(missing); err != nil {
		return fmt.Errorf("set the table properties: %w", err)
	}
	return nil
}
