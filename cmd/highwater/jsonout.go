package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/manifest"
)

// The --json shapes of the commands, one object per line. Their field
// names are an interface (docs/cli.md lists them, testdata/*.golden fixes
// them): add fields, never rename or remove one.

// exportJSON is one model of an export that committed.
type exportJSON struct {
	Model           string            `json:"model"`
	Tenant          *string           `json:"tenant,omitempty"` // of a model instance with tenants (--config)
	Seq             int64             `json:"seq"`
	Kind            string            `json:"kind"`
	RunID           string            `json:"run_id"`
	Resumed         bool              `json:"resumed"`
	From            *string           `json:"from"`
	To              *string           `json:"to"`
	ToBound         *string           `json:"to_bound"`
	Watermark       *string           `json:"watermark"`
	FilesAdded      int               `json:"files_added"`
	FilesRemoved    int               `json:"files_removed"`
	DurationSeconds *float64          `json:"duration_seconds"`
	Metrics         *manifest.Metrics `json:"metrics"`
	Warnings        []string          `json:"warnings"`
}

// exportErrorJSON is one model of an export that failed.
type exportErrorJSON struct {
	Model  string  `json:"model"`
	Tenant *string `json:"tenant,omitempty"`
	Error  string  `json:"error"`
}

func newExportJSON(model string, tenant *string, res *export.Result, err error) any {
	if err != nil {
		return exportErrorJSON{Model: model, Tenant: tenant, Error: oneLine(err.Error())}
	}
	j := exportJSON{Model: model, Tenant: tenant, Warnings: []string{}}
	c := res.Commit
	j.Seq, j.Kind, j.RunID, j.Resumed, j.Watermark = c.Seq, c.Kind, c.RunID, res.Resumed, c.Watermark
	if c.Interval != nil {
		j.From, j.To = c.Interval.From, &c.Interval.To
	}
	j.ToBound = nonEmpty(c.ToBound)
	j.FilesAdded, j.FilesRemoved, j.Metrics = len(c.Added), len(c.Removed), c.Metrics
	if res.Plan != nil {
		j.DurationSeconds = runDuration(res.Plan.Created, c.Committed)
	}
	if res.Warnings != nil {
		j.Warnings = res.Warnings
	}
	return j
}

// dedupeJSON is a dedupe: its commit, or why there was nothing to do.
type dedupeJSON struct {
	Model             string   `json:"model"`
	Tenant            *string  `json:"tenant,omitempty"`
	Committed         bool     `json:"committed"`
	Reason            string   `json:"reason,omitempty"`
	Seq               int64    `json:"seq,omitempty"`
	RunID             string   `json:"run_id,omitempty"`
	Buckets           int      `json:"buckets"`
	BucketsTouched    int      `json:"buckets_touched"`
	FullRewrite       bool     `json:"full_rewrite"`
	InputFiles        int      `json:"input_files"`
	InputRows         int64    `json:"input_rows"`
	InputBytes        int64    `json:"input_bytes"`
	OutputFiles       int      `json:"output_files"`
	OutputRows        int64    `json:"output_rows"`
	OutputBytes       int64    `json:"output_bytes"`
	TombstonesDropped int64    `json:"tombstones_dropped"`
	DurationSeconds   float64  `json:"duration_seconds"`
	Warnings          []string `json:"warnings"`
}

func newDedupeJSON(model string, tenant *string, res *dedupe.Result, took time.Duration) dedupeJSON {
	j := dedupeJSON{Model: model, Tenant: tenant, Committed: res.Commit != nil, Reason: res.Reason, Buckets: res.Layout.Buckets,
		BucketsTouched: res.BucketsTouched, FullRewrite: res.FullRewrite, InputFiles: res.InputFiles, InputRows: res.InputRows,
		InputBytes: res.InputBytes, OutputFiles: res.OutputFiles, OutputRows: res.OutputRows, OutputBytes: res.OutputBytes,
		TombstonesDropped: res.TombstonesDropped, DurationSeconds: took.Seconds(), Warnings: []string{}}
	if res.Commit != nil {
		j.Seq, j.RunID = res.Commit.Seq, res.Commit.RunID
	}
	if res.Warnings != nil {
		j.Warnings = res.Warnings
	}
	return j
}

// vacuumJSON is a vacuum, or what a dry run would do.
type vacuumJSON struct {
	Model             string   `json:"model"`
	Tenant            *string  `json:"tenant,omitempty"`
	DryRun            bool     `json:"dry_run"`
	Deleted           []string `json:"deleted"` // object URLs
	Bytes             int64    `json:"bytes"`
	DeclaredAbandoned []string `json:"declared_abandoned"`
	// Pruned are the object URLs of the run metadata (plans, checkpoints)
	// deleted, or that would be; Bytes counts only Deleted.
	Pruned []string `json:"pruned"`
	// IcebergMetadata are the object URLs of the Iceberg view's metadata
	// (metadata versions, manifest lists, manifests) deleted, or that
	// would be; empty for a model not published as Iceberg.
	IcebergMetadata []string `json:"iceberg_metadata"`
}

// verifyJSON is a verify: ok, or the problems found.
type verifyJSON struct {
	Model    string   `json:"model"`
	Tenant   *string  `json:"tenant,omitempty"`
	OK       bool     `json:"ok"`
	Checked  string   `json:"checked,omitempty"`
	Problems []string `json:"problems"`
}

func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// runDuration is a run's time from its plan to its commit, or nil when
// either is unknown.
func runDuration(planned, committed time.Time) *float64 {
	if planned.IsZero() || committed.IsZero() {
		return nil
	}
	s := committed.Sub(planned).Seconds()
	return &s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
