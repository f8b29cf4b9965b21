package dedupe

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/progress"
	"github.com/highwater-dev/highwater/internal/runopts"
)

// Defaults of Options.
const (
	DefaultMemoryLimit     = 256 << 20
	DefaultTargetFileBytes = 128 << 20
)

// ErrNoState: the model has no commits to dedupe.
var ErrNoState = errors.New("the model has no commits")

// Options describe one dedupe of one model.
type Options struct {
	Model string
	// MemoryLimit bounds the process's memory use; what does not fit is
	// spilled to TempDir.
	MemoryLimit int64
	// TargetFileBytes is the size at which output files roll.
	TargetFileBytes int64
	// KeepTombstones keeps every winning tombstone in the output. Without
	// it, a tombstone is kept only while an older version of its key could
	// still arrive, i.e. while its modified-at is within the lookback of
	// the watermark.
	KeepTombstones bool
	// Lookback overrides the lookback of the model's last export plan; when
	// nil and the log has no such plan, watermark.DefaultLookback.
	Lookback *time.Duration
	// TempDir holds spill files; os.TempDir() when empty.
	TempDir string
	// Compression of the output files; when empty, the lake's, as the
	// footer of its newest committed file names it (zstd for a lake
	// without one).
	Compression string
	// Buckets forces the number of key-hash buckets of a new layout; 0
	// chooses it from the data size.
	Buckets int
	// Build is named in the created_by of every output file.
	Build formats.Build

	Logger *slog.Logger
	// Progress, when set, counts the input rows read (of the inputs'
	// rows) and the output files written, for a display on a terminal.
	Progress *progress.Counter
	// Failpoint, when set, is called at named points of the run
	// ("dedupe-before-commit", "dedupe-after-commit"). A test makes it
	// kill the process, or panic, there.
	Failpoint func(name string)

	// noPresort makes the partition stage spill by bucket whatever the
	// layout, for the tests that compare both ways.
	noPresort bool
}

func (o *Options) setDefaults() {
	runopts.Positive(&o.MemoryLimit, DefaultMemoryLimit)
	runopts.Positive(&o.TargetFileBytes, DefaultTargetFileBytes)
	runopts.Defaults(&o.TempDir, &o.Logger, &o.Failpoint)
}

// Validate checks what can be checked before touching the destination.
func (o *Options) Validate() error {
	switch {
	case o.Model == "":
		return errors.New("no model name")
	case o.MemoryLimit > 0 && o.MemoryLimit < 8<<20:
		return fmt.Errorf("memory limit %d bytes is below the minimum of 8 MiB", o.MemoryLimit)
	case o.Lookback != nil && *o.Lookback < 0:
		return fmt.Errorf("lookback %s is negative", *o.Lookback)
	case o.Buckets < 0:
		return fmt.Errorf("bucket count %d is negative", o.Buckets)
	}
	return nil
}

// budget splits the memory limit between the parts of a run.
type budget struct {
	goLimit int64 // the Go runtime's memory limit (debug.SetMemoryLimit)
	// workers is how many files or buckets a run processes at once, and
	// how many encoders compress its output.
	workers       int
	sortBytes     int64 // records held in memory by the sort runs of all buckets
	rowGroupBytes int64 // raw bytes of the output row groups held at once (their encoded pages take as much again)
	metaBytes     int64 // metadata of the row groups of the open output files
	spillBuffers  int64 // write buffers of all bucket spill files together
}

// tooWide says, when one row is larger than a worker's share of the sort
// or row-group budget, that the limit cannot hold: a row is never split,
// so memory grows with the widest row whatever the limit.
func (b budget) tooWide(widest int64, workers int) string {
	share := min(b.sortBytes, b.rowGroupBytes) / int64(max(workers, 1))
	if widest <= share {
		return ""
	}
	return fmt.Sprintf("a row of %s is wider than the %s that --memory-limit leaves each worker for it: the process will exceed the limit by several times that row",
		humanize.IBytes(uint64(widest)), humanize.IBytes(uint64(share)))
}

// Reserves outside the data budgets.
const (
	// fileReserve stands for the binary's resident pages where they
	// cannot be measured.
	fileReserve = 40 << 20
	// slack covers what the Go limit does not: pages of the binary first
	// touched during the run, and memory the kernel counts before the
	// scavenger returns it.
	slack = 10 << 20
	// minGoLimit is the least heap a run works in; below it the collector
	// would run without end.
	minGoLimit = 16 << 20
	// maxWorkers bounds the files decoded and the buckets rewritten at
	// once.
	maxWorkers = 4
	// workerHeap is the Go memory one more worker needs to be worth it:
	// each holds an input file's pages, a zstd encoder, row groups and a
	// share of the sort budget. Under a tight limit more workers only make
	// the collector run without end (a 64 MiB limit took 70% more CPU
	// with two).
	workerHeap = 32 << 20
	// codecBytes is what one output encoder's zstd state holds (a 1 MiB
	// window, its history and tables), whatever the data.
	codecBytes = 2 << 20
	// groupMetaBytes is what the writer keeps of one column of one row
	// group until the footer: its chunk metadata, statistics and page
	// indexes (about 1 KiB measured, in Go structs and encoded).
	groupMetaBytes = 1 << 10
)

// newBudget gives the Go runtime what the limit leaves after the pages
// the process already holds outside it (fileBytes), takes out the heap in
// use (heapBytes: package state, the SDKs' registries) and the encoders'
// codecs, and sizes the data buffers at about a third of what is left
// (the row groups' share counts twice, for their encoded pages):
// the collector needs the rest to keep the heap under its limit without
// running constantly, and the parts not counted here (decoded input pages,
// the parquet.Row batches) take some. procs is GOMAXPROCS.
func newBudget(limit, fileBytes, heapBytes int64, procs int) budget {
	g := max(limit-fileBytes-slack, minGoLimit)
	workers := max(1, min(procs, maxWorkers, int(g/workerHeap)))
	free := max(g-heapBytes-int64(workers)*codecBytes, minGoLimit/2)
	return budget{
		goLimit:       g,
		workers:       workers,
		sortBytes:     free / 5,
		rowGroupBytes: min(free/32, 16<<20),
		metaBytes:     free / 32,
		spillBuffers:  free / 32,
	}
}

// feasible is the least limit the process can keep: below it the Go
// runtime would have less than minGoLimit.
func feasible(fileBytes int64) int64 { return fileBytes + slack + minGoLimit }
