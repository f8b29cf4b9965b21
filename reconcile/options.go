package reconcile

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/progress"
	"github.com/highwater-dev/highwater/internal/runopts"
	"github.com/highwater-dev/highwater/manifest"
)

// Defaults of Options.
const (
	DefaultMemoryLimit     = 256 << 20
	DefaultTargetFileBytes = 128 << 20
	// DefaultPageRows is the most rows of a keyset page of the source;
	// a page also ends at about pgsource.DefaultPageBytes of rows, as the
	// export's do, so that few page boundaries leave the backend idle.
	DefaultPageRows = 1_000_000
	// Samples is how many keys of each kind a result names.
	Samples = 10
)

// Errors that callers classify.
var (
	// ErrNoState: the model has no commits to compare with.
	ErrNoState = errors.New("the model has no commits")
	// ErrIdentity: the source is not the one the lake was exported from.
	ErrIdentity = errors.New("the destination's state belongs to another model")
	// ErrSchema: the source's columns are not those of the committed files.
	ErrSchema = errors.New("the source's columns differ from the lake's")
)

// Options describe one reconcile of one model.
type Options struct {
	Model  string
	Source pgsource.Spec
	// WindowStart and WindowEnd judge only rows whose modified-at lies in
	// [start, end), on either side; empty is open.
	WindowStart, WindowEnd string
	// KeysOnly compares keys and modified-at only, not the other values.
	KeysOnly bool
	// Repair writes, in the reconcile's commit, new versions of the
	// missing and changed rows and tombstones of the extra keys.
	Repair bool
	// MemoryLimit bounds the process's memory use; what does not fit is
	// spilled to TempDir.
	MemoryLimit int64
	TempDir     string
	PageRows    int
	// Of the repair's files.
	TargetFileBytes int64
	Compression     string
	Build           formats.Build

	Logger   *slog.Logger
	Progress *progress.Counter
	// Failpoint, when set, is called at "reconcile-before-commit".
	Failpoint func(name string)

	// judges and share, when set (by tests: export_test.go), fix how many
	// partitions are judged at once and each one's share of the budget.
	judges int
	share  int64
}

func (o *Options) setDefaults() {
	runopts.Positive(&o.MemoryLimit, DefaultMemoryLimit)
	runopts.Positive(&o.TargetFileBytes, DefaultTargetFileBytes)
	runopts.Positive(&o.PageRows, DefaultPageRows)
	if o.Compression == "" {
		o.Compression = "zstd"
	}
	runopts.Defaults(&o.TempDir, &o.Logger, &o.Failpoint)
}

// Validate checks what can be checked before touching the source or the
// destination.
func (o *Options) Validate() error {
	switch {
	case o.Model == "":
		return errors.New("no model name")
	case o.MemoryLimit > 0 && o.MemoryLimit < 16<<20:
		return fmt.Errorf("memory limit %d bytes is below the minimum of 16 MiB", o.MemoryLimit)
	case o.Repair && o.KeysOnly:
		return errors.New("--repair needs the values compared: it cannot be combined with --keys-only")
	}
	if _, err := formats.NewCodec(o.Compression); err != nil {
		return err
	}
	return nil
}

// Result describes a reconcile.
type Result struct {
	Report manifest.ReconcileReport
	// Commit records the report (and a repair's files).
	Commit *manifest.Commit
	// SourceRows and LakeRows count the rows read on each side (the lake's
	// before dedupe's rule).
	SourceRows, LakeRows int64
	Warnings             []string
}

// Equal reports whether the lake equals the source.
func (r *Result) Equal() bool { return r.Report.Equal() }
