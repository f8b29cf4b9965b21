// Package export runs one export of a model: it plans the interval, pages
// through the source, writes Parquet files with a checkpoint each, and
// commits them to the model's log.
package export

import (
	"errors"
	"fmt"
	"github.com/highwater-dev/highwater/internal/progress"
	"log/slog"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
)

// Errors that callers classify.
var (
	// ErrIdentity: the destination holds state of another table, tenant or
	// source.
	ErrIdentity = errors.New("the destination's state belongs to another model")
	// ErrRaceLost: another export committed after this run was planned, or
	// another attempt of the run committed it; it wraps
	// manifest.ErrSuperseded or manifest.ErrCommitted. A run a vacuum
	// declared dead fails with manifest.ErrAbandoned.
	ErrRaceLost = errors.New("another export committed first")
	// ErrUnsafeLookback: the lookback is too short for what the source
	// lets the upper bound see (a hot standby).
	ErrUnsafeLookback = errors.New("lookback too short for this source")
)

// Defaults of Options.
const (
	DefaultTargetFileBytes = 128 << 20
	DefaultRowGroupBytes   = 16 << 20
	DefaultRowGroupRows    = 1_000_000
	// DefaultPageRows is the most rows of a keyset page of the table. A
	// page is also bounded by the wire size of its rows
	// (pgsource.DefaultPageBytes), which
	// is what ends the pages of all but the narrowest rows. Each page
	// boundary leaves the backend idle while the client drains the rows
	// the socket still holds and sends the next statement: 8-15 ms each on
	// 2 cores, about a tenth of a run of 50,000-row pages (docs/bench.md).
	DefaultPageRows = 1_000_000
	// MinReplicaLookback is the shortest lookback allowed from a hot
	// standby: it cannot see the primary's open transactions, so only the
	// lookback protects rows of those that commit late. It is the
	// default's, so that a default export from a replica keeps working and
	// a replica never silently runs with less than a primary's protection
	// from an established tool.
	MinReplicaLookback = watermark.DefaultLookback
)

const (
	// deleteLogPageRows bounds a page of the delete log, which the server
	// sorts a second time, in memory when it fits work_mem.
	deleteLogPageRows = 50_000
)

// Options describe one export of one model.
type Options struct {
	// Model names the dataset; its state lives under <dest>/<Model>/.
	Model  string
	Source pgsource.Spec
	// Lookback is re-read below the watermark on every incremental run.
	Lookback time.Duration
	// FullRefresh reads everything and replaces every earlier file.
	FullRefresh bool
	// WindowStart and WindowEnd make a backfill of [start, end) that does
	// not move the watermark.
	WindowStart, WindowEnd string
	// TimeZone interprets a naive timestamp or date modified-at column; the
	// database's TimeZone when empty.
	TimeZone string
	// DeleteLog also reads the delete log that `highwater deletes install`
	// put on the table, and writes its entries as tombstones.
	DeleteLog bool

	TargetFileBytes int64
	RowGroupBytes   int64
	RowGroupRows    int64
	PageRows        int
	Compression     string
	Formats         formats.Options
	// Build is named in the created_by of every file.
	Build formats.Build

	Logger *slog.Logger
	// Progress, when set, counts the rows and files of the run as they are
	// written, for a display on a terminal.
	Progress *progress.Counter
	// Advice, when shared by the instances of a model, says each warning
	// about the model's table once for all of them (see Advice).
	Advice *Advice
	// Failpoint, when set, is called at named points of the run; a test
	// makes it kill the process there.
	Failpoint func(name string)
}

func (o *Options) setDefaults() {
	if o.TargetFileBytes <= 0 {
		o.TargetFileBytes = DefaultTargetFileBytes
	}
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = DefaultRowGroupBytes
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.PageRows <= 1 {
		o.PageRows = DefaultPageRows
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Failpoint == nil {
		o.Failpoint = func(string) {}
	}
}

// Validate checks what can be checked before connecting.
func (o *Options) Validate() error {
	switch {
	case o.Model == "":
		return errors.New("no model name")
	case o.Lookback < 0:
		return fmt.Errorf("lookback %s is negative", o.Lookback)
	case (o.WindowStart == "") != (o.WindowEnd == ""):
		return errors.New("a backfill window needs both --window-start and --window-end")
	case o.WindowStart != "" && o.FullRefresh:
		return errors.New("--full-refresh and a backfill window exclude each other")
	case o.Source.Table == "" && o.Source.Query == "":
		return errors.New("no table or source_query")
	case o.Source.Table != "" && o.Source.Query != "":
		return errors.New("give a table or a source_query, not both")
	case o.Source.ModifiedAt == "":
		return errors.New("no modified-at column")
	case len(o.Source.PrimaryKey) == 0:
		return errors.New("no primary key")
	case o.DeleteLog && o.Source.Query != "":
		return errors.New("--delete-log needs a table: a source_query has no delete log of its own (use a soft-delete column)")
	}
	return validModelName(o.Model)
}

func validModelName(name string) error {
	if name == "." || name == ".." || name[0] == '_' {
		return fmt.Errorf("model name %q is not allowed", name)
	}
	for _, r := range name {
		if r == '/' || r == '\\' || r < 0x20 {
			return fmt.Errorf("model name %q may not contain %q", name, r)
		}
	}
	return nil
}

func (o *Options) kind() string {
	switch {
	case o.FullRefresh:
		return "full_refresh"
	case o.WindowStart != "":
		return "backfill"
	}
	return "export"
}
