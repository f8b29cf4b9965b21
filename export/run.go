package export

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go/compress"
)

// Result describes a committed run.
type Result struct {
	Commit *manifest.Commit
	// State is the log's state folded up to Commit, so that what follows
	// the export (the table formats) need not read the log again.
	State    *manifest.State
	Plan     *manifest.Plan
	Resumed  bool
	Warnings []string
}

type runner struct {
	opts    Options
	src     *pgsource.Source
	bucket  objstore.Bucket
	url     func(key string) string
	log     *manifest.Log
	table   *pgsource.Table
	mapping *formats.Mapping
	codec   compress.Codec // shared by the run's files: it holds zstd's history
	schema  *manifest.Schema
	id      manifest.Identity
	plan    *manifest.Plan
	chain   []manifest.FileCheckpoint
	attempt string
	logger  *slog.Logger
	// dryRun stops the run once planned, with nothing written (DryRun).
	dryRun bool

	deleteLog *pgsource.DeleteLog // the model's, with DeleteLog set
	since     *string             // see watermarkInstant
	sinceAt   *time.Time          // see watermarkInstant

	warnMu sync.Mutex // the reader goroutine warns too
	warn   []string
}

// Run exports one model into the lake rooted at b. It resumes the model's
// unfinished run when there is one, and otherwise plans a new one.
// objectURL turns a key of b into the URL by which engines read it, for
// the symlink manifest and for errors.
func Run(ctx context.Context, src *pgsource.Source, b objstore.Bucket, objectURL func(key string) string, opts Options) (*Result, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &runner{opts: opts, src: src, bucket: b, url: objectURL, log: manifest.NewLog(b, opts.Model),
		attempt: manifest.NewRunID(time.Now()), logger: opts.Logger.With("model", opts.Model)}
	r.log.Failpoint = opts.Failpoint
	return r.run(ctx)
}

func (r *runner) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.warnMu.Lock()
	r.warn = append(r.warn, msg)
	r.warnMu.Unlock()
	r.logger.Warn(msg)
}

// run goes through the stages in order: plan (what to read, written down
// before anything is read), extract (rows into files, each followed by
// its checkpoint) and commit (the files into the log).
func (r *runner) run(ctx context.Context) (*Result, error) {
	resumed, err := r.planRun(ctx)
	if err != nil {
		return nil, err
	}
	if r.dryRun {
		return &Result{Plan: r.plan, Resumed: resumed, Warnings: r.warn}, nil
	}
	r.opts.Failpoint("after-plan")
	if err := r.checkDeleteLog(ctx); err != nil {
		return nil, err
	}
	r.startProgress(ctx)
	metrics, files, err := r.extract(ctx)
	if err != nil {
		return nil, err
	}
	if metrics, files, err = r.tombstones(ctx, metrics, files); err != nil {
		return nil, err
	}
	c, st, err := r.commit(ctx, metrics, files)
	if err != nil {
		return nil, err
	}
	r.opts.Failpoint("after-commit")
	r.opts.Failpoint("before-symlink")
	if err := r.log.WriteSymlinkManifestFrom(ctx, st, r.url); err != nil {
		// The commit stands; the next commit rewrites the list.
		r.warnf("rewrite the symlink manifest: %v", err)
	}
	return &Result{Commit: c, State: st, Plan: r.plan, Resumed: resumed, Warnings: r.warn}, nil
}
