// Package manifest defines highwater's durable state and the commit log that
// holds it. Everything a reader or a later run needs lives in the destination,
// next to the data, as JSON:
//
//	<model>/_runs/<run-id>/plan.json          the plan, written before extraction
//	<model>/_runs/<run-id>/ckpt-<n>.json      one per durable data file, a chain
//	<model>/_manifests/<seq>.json             commits, seq zero-padded, gapless
//	<model>/_manifests/<seq>.checkpoint.json  the folded state every N commits
//	<model>/_manifests/_last_checkpoint       a hint naming the newest of those,
//	                                          for readers that did not list
//	<model>/data/<run-id>/<attempt-id>/part-<n>.parquet
//
// Run ids start with their UTC creation time, so keys sort in the order they
// were written. Commits and checkpoints are written create-if-absent: the
// store's own precondition is the only lock. Values of the modified-at and
// key columns are kept as PostgreSQL text literals, never as JSON numbers, so
// that an int8 above 2^53 or a microsecond never passes through a float.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/watermark"
)

// FormatVersion is the version of the state written by this build;
// MinReaderVersion is the oldest reader that understands it.
const (
	FormatVersion    = 1
	MinReaderVersion = 1
)

// Kinds of runs, as recorded in plans and commits.
const (
	KindExport      = "export"
	KindFullRefresh = "full_refresh"
	KindBackfill    = "backfill"
	KindDedupe      = "dedupe"
	KindVacuum      = "vacuum"
	// KindTableFormat commits only a change of the table formats the model
	// is also published in (TableFormats); it moves no watermark and names
	// no file.
	KindTableFormat = "table_format"
)

// TableFormatIceberg publishes the model as an Apache Iceberg table too
// (package iceberg).
const TableFormatIceberg = "iceberg"

// MovesWatermark reports whether commits of this kind move the watermark
// (a reset moves it backwards). Only those make a concurrent export abandon
// its plan; the others are rebased over.
func MovesWatermark(kind string) bool {
	return kind == KindExport || kind == KindFullRefresh || kind == KindReset
}

// Version is the header of every state document.
type Version struct {
	FormatVersion    int `json:"format_version"`
	MinReaderVersion int `json:"min_reader_version"`
}

func currentVersion() Version {
	return Version{FormatVersion: FormatVersion, MinReaderVersion: MinReaderVersion}
}

func (v Version) check(what string) error {
	if v.MinReaderVersion > FormatVersion {
		return fmt.Errorf("%s needs highwater state format %d or newer, this build reads %d: upgrade highwater", what, v.MinReaderVersion, FormatVersion)
	}
	return nil
}

// Identity says what a model's state belongs to. A run whose identity
// differs from the committed one is refused, so two tables or two tenants
// never share a watermark by accident.
type Identity struct {
	SystemID string `json:"system_identifier"`
	Database string `json:"database"`
	Relation string `json:"relation,omitempty"`
	// RelationOID is the relation's pg_class OID: a table dropped and
	// recreated under the same name, or restored from a dump, gets another.
	// (Its relfilenode would not do: TRUNCATE and VACUUM FULL change it.)
	// 0 for a source_query, and in commits written before it was recorded.
	RelationOID uint32   `json:"relation_oid,omitempty"`
	QueryHash   string   `json:"source_query_sha256,omitempty"`
	PrimaryKey  []string `json:"primary_key"`
	ModifiedAt  string   `json:"modified_at"`
	// ModifiedAtKind is the column's watermark.Kind, in its String form:
	// a watermark is a literal of that type. Empty in commits written
	// before it was recorded.
	ModifiedAtKind string  `json:"modified_at_kind,omitempty"`
	TenantColumn   string  `json:"tenant_column,omitempty"`
	Tenant         *string `json:"tenant,omitempty"`
	// TimeZone interprets a naive timestamp modified-at column.
	TimeZone string `json:"time_zone,omitempty"`
	// SoftDelete names the column whose rows are tombstones; DeleteLog
	// says that runs read the delete log highwater installs. Turning either
	// on or off changes which deletes the committed files hold, so only a
	// full refresh may follow.
	SoftDelete string `json:"soft_delete,omitempty"`
	DeleteLog  bool   `json:"delete_log,omitempty"`
}

// Diff names the first field in which other differs, or "" when equal.
func (id Identity) Diff(other Identity) string {
	str := func(p *string) string {
		if p == nil {
			return "(none)"
		}
		return fmt.Sprintf("%q", *p)
	}
	switch {
	case id.SystemID != other.SystemID:
		return fmt.Sprintf("source system %s, not %s", id.SystemID, other.SystemID)
	case id.Database != other.Database:
		return fmt.Sprintf("database %q, not %q", id.Database, other.Database)
	case id.Relation != "" && other.Relation == "":
		return fmt.Sprintf("relation %q, not a source_query", id.Relation)
	case id.Relation == "" && other.Relation != "":
		return fmt.Sprintf("a source_query, not relation %q", other.Relation)
	case id.Relation != other.Relation:
		return fmt.Sprintf("relation %q, not %q", id.Relation, other.Relation)
	case id.RelationOID != other.RelationOID:
		return fmt.Sprintf("relation %q with OID %d, not OID %d", id.Relation, id.RelationOID, other.RelationOID)
	case id.QueryHash != other.QueryHash:
		return "another source_query"
	case !slices.Equal(id.PrimaryKey, other.PrimaryKey):
		return fmt.Sprintf("primary key %v, not %v", id.PrimaryKey, other.PrimaryKey)
	case id.ModifiedAt != other.ModifiedAt:
		return fmt.Sprintf("modified-at column %q, not %q", id.ModifiedAt, other.ModifiedAt)
	case id.ModifiedAtKind != "" && other.ModifiedAtKind != "" && id.ModifiedAtKind != other.ModifiedAtKind:
		return fmt.Sprintf("modified-at column %q of type %s, not %s", id.ModifiedAt, id.ModifiedAtKind, other.ModifiedAtKind)
	case id.TenantColumn != other.TenantColumn:
		return fmt.Sprintf("tenant column %q, not %q", id.TenantColumn, other.TenantColumn)
	case str(id.Tenant) != str(other.Tenant):
		return fmt.Sprintf("tenant %s, not %s", str(id.Tenant), str(other.Tenant))
	case id.TimeZone != other.TimeZone:
		return fmt.Sprintf("time zone %q, not %q", id.TimeZone, other.TimeZone)
	case id.SoftDelete != other.SoftDelete:
		return fmt.Sprintf("soft-delete column %s, not %s", quotedOrNone(id.SoftDelete), quotedOrNone(other.SoftDelete))
	case id.DeleteLog != other.DeleteLog:
		return fmt.Sprintf("delete log %s, not %s", onOff(id.DeleteLog), onOff(other.DeleteLog))
	}
	return ""
}

func quotedOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// SameModel reports whether other is the model of id, perhaps read from
// another incarnation of its source: a cluster restored or upgraded into a
// new one (another system identifier), or the table dropped and recreated
// or restored from a dump (another OID), or its modified-at column
// altered to another type (which may add or drop the time zone that reads
// it). Such a source may be continued only by a full refresh, which adopts
// its identity: the watermark says nothing about the rows of the new
// incarnation.
func (id Identity) SameModel(other Identity) bool {
	if id.ModifiedAtKind != "" && other.ModifiedAtKind != "" && id.ModifiedAtKind != other.ModifiedAtKind {
		other.ModifiedAtKind, other.TimeZone = id.ModifiedAtKind, id.TimeZone
	}
	other.SystemID, other.RelationOID = id.SystemID, id.RelationOID
	// A full refresh rewrites every tombstone, so it may also change where
	// they come from.
	other.SoftDelete, other.DeleteLog = id.SoftDelete, id.DeleteLog
	return id.Diff(other) == ""
}

// Completes reports whether other is id with the fields that id, written
// before they were recorded, lacks filled in: the relation's OID, the
// modified-at kind.
func (id Identity) Completes(other Identity) bool {
	filled := false
	if id.RelationOID == 0 && other.RelationOID != 0 {
		id.RelationOID, filled = other.RelationOID, true
	}
	if id.ModifiedAtKind == "" && other.ModifiedAtKind != "" {
		id.ModifiedAtKind, filled = other.ModifiedAtKind, true
	}
	return filled && id.Diff(other) == ""
}

// Interval is the half-open range of the modified-at column that a run
// reads; Cursor is a position in (modified_at, pk...) order. Both are the
// watermark package's, so that there is one rule for what they mean.
type (
	Interval = watermark.Interval
	Cursor   = watermark.Cursor
)

// Metrics are counted by every export.
type Metrics struct {
	RowsTransferred int64 `json:"rows_transferred"`
	// DeletesTransferred counts the tombstones written: rows a soft-delete
	// column marks deleted (also counted as rows) and delete log entries.
	DeletesTransferred   int64 `json:"deletes_transferred"`
	DeltaRowsTransferred int64 `json:"delta_rows_transferred"`
	RowsInLookback       int64 `json:"rows_in_lookback"`
	RowsBeyondTo         int64 `json:"rows_beyond_to"`
	RowsNullModifiedAt   int64 `json:"rows_null_modified_at"`
	Files                int64 `json:"files"`
	Bytes                int64 `json:"bytes"`
	Pages                int64 `json:"pages"`
}

// Add accumulates the per-file counters of m2 into m.
func (m *Metrics) Add(m2 Metrics) {
	m.RowsTransferred += m2.RowsTransferred
	m.DeltaRowsTransferred += m2.DeltaRowsTransferred
	m.RowsInLookback += m2.RowsInLookback
	m.RowsBeyondTo += m2.RowsBeyondTo
	m.RowsNullModifiedAt += m2.RowsNullModifiedAt
	m.Files += m2.Files
	m.Bytes += m2.Bytes
	m.Pages += m2.Pages
	m.DeletesTransferred += m2.DeletesTransferred
}

// File is one committed data file.
type File struct {
	// Key is relative to the model's root: data/<run>/<attempt>/part-<n>.parquet.
	Key    string `json:"key"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// First and Last are the first and last rows in (modified_at, pk) order.
	First *Cursor `json:"first,omitempty"`
	Last  *Cursor `json:"last,omitempty"`
	// MinModifiedAt and MaxModifiedAt ignore NULLs; nil when all are NULL.
	MinModifiedAt *string `json:"min_modified_at,omitempty"`
	MaxModifiedAt *string `json:"max_modified_at,omitempty"`
	SchemaID      string  `json:"schema_id"`
	// DeletesLast, in a file of delete log tombstones, is the log position
	// (deleted_at, entry id) of its last one: an attempt resumed after it
	// continues the log there.
	DeletesLast *Cursor `json:"deletes_last,omitempty"`
	// Bucket is the dedupe layout's partition of the file, when it has one.
	Bucket *int `json:"bucket,omitempty"`
}

// Schema is the Parquet schema of a model's files.
type Schema struct {
	ID     string           `json:"id"`
	Fields []formats.Field  `json:"fields"`
	Source []formats.Column `json:"source_columns,omitempty"`
}

// NewSchema gives fields a content-derived id.
func NewSchema(fields []formats.Field, source []formats.Column) *Schema {
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return &Schema{ID: hex.EncodeToString(sum[:8]), Fields: fields, Source: source}
}

// Plan is written before the first page is read. A retry of the run reuses
// it, and so its upper bound.
type Plan struct {
	Version
	RunID    string   `json:"run_id"`
	Model    string   `json:"model"`
	Kind     string   `json:"kind"`
	Identity Identity `json:"identity"`
	Interval Interval `json:"interval"`
	// ToBound says what fixed Interval.To: "clock", "oldest_transaction",
	// "replay", "prepared_transaction", "window".
	ToBound       string  `json:"to_bound"`
	ToBoundDetail string  `json:"to_bound_detail,omitempty"`
	PrevWatermark *string `json:"previous_watermark"`
	// Watermark is what the run commits as the watermark when it is not
	// Interval.To: a date column is read to the end of the bound's day, but
	// that day can still receive rows.
	Watermark string `json:"watermark,omitempty"`
	// Warnings say what the upper bound could not protect; every attempt
	// of the run repeats them.
	Warnings []string `json:"warnings,omitempty"`
	// FromFloor is the start of a transaction still open when the run was
	// planned but older than the upper bound's cap: the next run's from stays
	// at or below it until the transaction ends.
	FromFloor *string `json:"from_floor,omitempty"`
	// BaseSeq is the head of the log the plan was made on (0: empty log).
	BaseSeq  int64  `json:"base_seq"`
	Lookback string `json:"lookback"`
	// HWVersion is written into every row's _hw_version (µs since the epoch).
	HWVersion int64     `json:"hw_version"`
	Created   time.Time `json:"created"`
}

// FileCheckpoint records one durable data file of a run. The checkpoints
// of a run form a chain: ckpt-<n> names ckpt-<n-1>, and each is written
// create-if-absent, so two attempts can never both extend the chain.
type FileCheckpoint struct {
	Version
	RunID     string `json:"run_id"`
	AttemptID string `json:"attempt_id"`
	N         int    `json:"n"`
	Prev      string `json:"prev,omitempty"`
	File      File   `json:"file"`
	// Metrics are the run's totals up to and including this file, so that
	// a resumed attempt keeps counting.
	Metrics Metrics   `json:"metrics"`
	Written time.Time `json:"written"`
}

// Commit is one entry of the log.
type Commit struct {
	Version
	Seq      int64    `json:"seq"`
	CommitID string   `json:"commit_id"`
	Kind     string   `json:"kind"`
	RunID    string   `json:"run_id"`
	Identity Identity `json:"identity"`
	// AdoptsIdentity: from this commit on, Identity is the model's, e.g. a
	// full refresh of a source restored into a new cluster. Without it the
	// first commit's identity stays the model's.
	AdoptsIdentity bool      `json:"adopts_identity,omitempty"`
	Interval       *Interval `json:"interval,omitempty"`
	ToBound        string    `json:"to_bound,omitempty"`
	// ToBoundDetail says why, e.g. which transaction held to back, or why
	// the bound fell back to the lookback.
	ToBoundDetail string `json:"to_bound_detail,omitempty"`
	// Watermark after this commit (unchanged by dedupe, backfill, vacuum).
	Watermark *string `json:"watermark"`
	// FromFloor caps the next run's from, e.g. at the start of a stuck
	// transaction that the upper bound had to ignore.
	FromFloor *string  `json:"from_floor,omitempty"`
	Added     []File   `json:"added,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	// Abandoned lists runs that a vacuum declared dead: they can no longer
	// commit, and their files may be deleted.
	Abandoned []string `json:"abandoned,omitempty"`
	// Forgotten lists committed runs that a vacuum took out of the state's
	// Runs once it had deleted their plans and checkpoints: nothing lists
	// them any more, and Live refuses an attempt of one without them (see
	// State.Runs).
	Forgotten []string `json:"forgotten,omitempty"`
	Schema    *Schema  `json:"schema,omitempty"`
	Metrics   *Metrics `json:"metrics,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	// Layout records the dedupe layout (e.g. key-hash buckets).
	Layout json.RawMessage `json:"layout,omitempty"`
	// Reconcile and Reset are the reports of those kinds (reconcile.go).
	Reconcile *ReconcileReport `json:"reconcile,omitempty"`
	Reset     *ResetReport     `json:"reset,omitempty"`
	// TableFormats, when set, are the table formats the model is
	// published in from this commit on, besides its own Parquet files
	// and log (e.g. TableFormatIceberg).
	TableFormats []string  `json:"table_formats,omitempty"`
	Committed    time.Time `json:"committed"`
}
