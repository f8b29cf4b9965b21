package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

type runner struct {
	opts    Options
	src     *pgsource.Source
	bucket  objstore.Bucket
	url     func(key string) string
	log     *manifest.Log
	logger  *slog.Logger
	table   *pgsource.Table
	mapping *formats.Mapping
	shape   rowShape
	st      *manifest.State
	id      manifest.Identity
	kind    watermark.Kind
	window  window
	mem     *memory
	budget  int64 // bytes of records compared in memory at once, at the start
	spill   string
	res     *Result
	// diffs holds, in the order found, every key that differs, for a
	// repair; the judges write it under diffMu.
	diffs      *os.File
	diffW      *bufio.Writer
	diffMu     sync.Mutex
	diffBuf    []byte
	maxVersion int64
}

// window is the modified-at range judged, parsed.
type window struct {
	from, to       *watermark.Value
	fromLit, toLit *string
}

func (w window) open() bool { return w.from == nil && w.to == nil }

func (w window) holds(r *record) bool {
	if w.open() {
		return true
	}
	if r.modNull() {
		return false
	}
	v := watermark.Value(r.mod)
	return (w.from == nil || v >= *w.from) && (w.to == nil || v < *w.to)
}

// Run compares the model's lake with its source, commits the result as a
// commit of kind reconcile and, with Repair, the files that make the lake
// equal to the source once deduped. The lake is rooted at b; objectURL
// turns a key of b into the URL by which engines read it, for the symlink
// manifest.
func Run(ctx context.Context, src *pgsource.Source, b objstore.Bucket, objectURL func(key string) string, opts Options) (*Result, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &runner{opts: opts, src: src, bucket: b, url: objectURL, log: manifest.NewLog(b, opts.Model), logger: opts.Logger.With("model", opts.Model), res: &Result{}}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	// Records and buffers are the only data held; the binary's pages,
	// measured (memory.go), and the collector's headroom take the rest.
	r.mem = newMemory(opts.MemoryLimit)
	defer r.mem.release()
	r.budget = r.mem.budget()
	if r.mem.short {
		r.warnf("--memory-limit %d MiB leaves the heap less than %d MiB beside the pages this binary holds resident: memory will exceed the limit; the least that holds is about %d MiB",
			opts.MemoryLimit>>20, leastGoLimit>>20, (r.mem.least()+1<<20-1)>>20)
	}
	dir, err := newSpillDir(opts.TempDir)
	if err != nil {
		return nil, err
	}
	r.spill = dir
	defer os.RemoveAll(dir)
	if err := r.compare(ctx); err != nil {
		return nil, err
	}
	var added []manifest.File
	var p *manifest.Plan
	if opts.Repair && !r.res.Report.Equal() {
		if p, added, err = r.repair(ctx); err != nil {
			return nil, err
		}
	}
	opts.Failpoint("reconcile-before-commit")
	if err := r.commit(ctx, p, added); err != nil {
		if len(added) > 0 {
			r.discard(added)
		}
		return nil, err
	}
	if len(added) > 0 {
		if err := r.log.WriteSymlinkManifest(ctx, r.url); err != nil {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("rewrite the symlink manifest: %v", err))
		}
	}
	return r.res, nil
}

func (r *runner) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.res.Warnings = append(r.res.Warnings, msg)
	r.logger.Warn(msg)
}

// prepare discovers the source, checks it against the committed state and
// builds the mapping the export would use for it.
func (r *runner) prepare(ctx context.Context) error {
	st, err := r.log.ReadState(ctx)
	if err != nil {
		return fmt.Errorf("read the state of %s: %w", r.opts.Model, err)
	}
	if st.Seq == 0 || st.Identity == nil || st.Schema == nil {
		return fmt.Errorf("reconcile %s: %w: export it first", r.opts.Model, ErrNoState)
	}
	r.st = st
	t, err := r.src.Discover(ctx, r.opts.Source)
	if err != nil {
		return err
	}
	r.table = t
	id := manifest.Identity{SystemID: r.src.SystemID, Database: r.src.Database, Relation: t.Relation, RelationOID: t.RelOID, QueryHash: t.QueryHash,
		PrimaryKey: t.PrimaryKey, ModifiedAt: t.ModifiedAt, ModifiedAtKind: t.ModKind.String(), TenantColumn: t.TenantColumn, Tenant: t.Tenant,
		TimeZone: st.Identity.TimeZone}
	if t.ModKind == watermark.Timestamptz {
		id.TimeZone = ""
	}
	if d := st.Identity.Diff(id); d != "" && !st.Identity.Completes(id) {
		return fmt.Errorf("reconcile %s: %w: the lake was exported from %s", r.opts.Model, ErrIdentity, d)
	}
	r.id = *st.Identity
	r.kind = t.ModKind
	// The files' own choices among the mapping's alternatives, so that the
	// source's rows become exactly what an export wrote.
	var fo formats.Options
	for _, f := range st.Schema.Fields {
		switch {
		case f.Logical == "UUID":
			fo.UUIDLogical = true
		case strings.HasPrefix(f.Logical, "TIME("):
			fo.TimeAsParquetTime = true
		}
	}
	if r.mapping, err = formats.NewMapping(t.Columns, fo); err != nil {
		return fmt.Errorf("map the columns of %s to Parquet: %w", r.opts.Model, err)
	}
	if err := sameFields(st.Schema.Fields, r.mapping.Fields()); err != nil {
		return fmt.Errorf("reconcile %s: %w: %v; export the model first (a full refresh after a type change)", r.opts.Model, ErrSchema, err)
	}
	r.shape = newRowShape(len(t.Columns), t.KeyColumns(), t.ModColumn(), r.opts.KeysOnly)
	for _, lit := range []struct {
		in  string
		out **watermark.Value
		lit **string
	}{{r.opts.WindowStart, &r.window.from, &r.window.fromLit}, {r.opts.WindowEnd, &r.window.to, &r.window.toLit}} {
		if lit.in == "" {
			continue
		}
		s, v, err := r.src.Normalize(ctx, t, lit.in)
		if err != nil {
			return fmt.Errorf("read the window bound %q: %w", lit.in, err)
		}
		*lit.out, *lit.lit = &v, &s
	}
	if r.window.from != nil && r.window.to != nil && *r.window.to <= *r.window.from {
		return fmt.Errorf("the window [%s, %s) is empty: %w", *r.window.fromLit, *r.window.toLit, pgsource.ErrBadModel)
	}
	return nil
}

// sameFields says how the source's fields differ from the committed ones.
func sameFields(committed, source []formats.Field) error {
	name := func(fs []formats.Field) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.Name
		}
		return out
	}
	if !slices.Equal(name(committed), name(source)) {
		return fmt.Errorf("the lake has columns %s, the source %s", strings.Join(name(committed), ", "), strings.Join(name(source), ", "))
	}
	for i, c := range committed {
		s := source[i]
		if c.Physical != s.Physical || c.Logical != s.Logical || c.Repeated != s.Repeated || c.Precision != s.Precision || c.Scale != s.Scale {
			return fmt.Errorf("column %q is %s %s in the lake and %s %s from the source", c.Name, c.Physical, c.Logical, s.Physical, s.Logical)
		}
	}
	return nil
}

// judgeMinShare is the least budget a partition is judged in: below it,
// judging partitions side by side would only make more of them.
const judgeMinShare = 4 << 20

// judges is how many partitions are judged at once: one per CPU, as many
// as the budget holds at judgeMinShare each.
func (r *runner) judges() int {
	return max(1, min(runtime.GOMAXPROCS(0), int(r.budget/judgeMinShare)))
}

// partitionCount spreads the expected records so that one partition of
// both sides fits a judge's share of the budget several times over.
func (r *runner) partitionCount(share int64) int {
	var rows int64
	for _, f := range r.st.Files {
		rows += f.Rows
	}
	est := 2 * rows * (recHeader + 16 + 24)
	n := 16
	for n < 4096 && int64(n)*share/4 < est {
		n *= 2
	}
	return n
}

// compare reads both sides into partitions and judges each partition.
func (r *runner) compare(ctx context.Context) error {
	judges := r.judges()
	if r.opts.judges > 0 {
		judges = r.opts.judges
	}
	n := r.partitionCount(r.budget / int64(judges))
	// While both sides are read, the spill buffers are most of what is
	// held: half the budget each, so that a write moves more at a time.
	bufs := max(r.budget/2, 1<<20)
	srcParts, err := newPartitions(r.spill, "source", n, 0, bufs)
	if err != nil {
		return err
	}
	defer srcParts.close()
	lakeParts, err := newPartitions(r.spill, "lake", n, 0, bufs)
	if err != nil {
		return err
	}
	defer lakeParts.close()
	for _, f := range r.st.Files {
		r.opts.Progress.AddTotal(2 * f.Rows)
	}
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer func() { r.logger.Debug("read the source", "took", time.Since(t0)) }()
		return r.readSource(gctx, srcParts)
	})
	g.Go(func() error {
		defer func() { r.logger.Debug("read the lake", "took", time.Since(t0)) }()
		return r.readLake(gctx, lakeParts)
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if err := srcParts.finish(); err != nil {
		return err
	}
	if err := lakeParts.finish(); err != nil {
		return err
	}
	r.res.SourceRows, r.res.LakeRows = srcParts.rows, lakeParts.rows
	if r.opts.Repair {
		f, err := os.CreateTemp(r.spill, "diffs-*")
		if err != nil {
			return fmt.Errorf("create a spill file: %w", err)
		}
		r.diffs, r.diffW = f, bufio.NewWriterSize(f, 64<<10)
	}
	c, err := r.judgeAll(ctx, srcParts, lakeParts, judges)
	if err != nil {
		return err
	}
	r.logger.Debug("judged the partitions", "partitions", n, "judges", judges, "took", time.Since(t0))
	// A windowed comparison cannot tell from the window alone whether a
	// key the lake holds in it is gone from the source or was moved out
	// of the window there: those are read back by key.
	if len(c.maybeExtra) > 0 {
		if err := r.resolveExtra(ctx, c); err != nil {
			return err
		}
	}
	if r.diffW != nil {
		if err := r.diffW.Flush(); err != nil {
			return fmt.Errorf("write a spill file: %w", err)
		}
	}
	rep := &r.res.Report
	rep.WindowStart, rep.WindowEnd, rep.KeysOnly = r.window.fromLit, r.window.toLit, r.opts.KeysOnly
	rep.Matched, rep.Missing, rep.Extra, rep.Changed = c.matched, c.missing, c.extra, c.changed
	if rep.MissingKeys, err = r.sampleTexts(c.samples[kindMissing]); err != nil {
		return err
	}
	if rep.ExtraKeys, err = r.sampleTexts(c.samples[kindExtra]); err != nil {
		return err
	}
	if rep.ChangedKeys, err = r.sampleTexts(c.samples[kindChanged]); err != nil {
		return err
	}
	r.logger.Info("reconciled", "matched", c.matched, "missing", c.missing, "extra", c.extra, "changed", c.changed)
	return nil
}

// judgeAll judges the partitions, judges of them at once, each in its
// share of the budget as it is when the judge takes the partition, and
// adds up what they found. Partitions hold disjoint keys, so the sum is
// the comparison of the whole: the counts and samples do not depend on
// which judge took which partition, only the order of the repair's
// spilled differences does.
func (r *runner) judgeAll(ctx context.Context, src, lake *partitions, judges int) (*comparison, error) {
	found := make([]comparison, judges)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for w := range judges {
		g.Go(func() error {
			j := &judge{r: r, share: r.opts.share, judges: judges, c: &found[w]}
			for {
				i := int(next.Add(1) - 1)
				if i >= src.count() {
					return nil
				}
				if err := j.partition(gctx, src, lake, i, 0); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	c := &found[0]
	for _, f := range found[1:] {
		c.add(&f)
	}
	return c, nil
}

// Kinds of difference.
const (
	kindMissing = iota
	kindExtra
	kindChanged
)

type comparison struct {
	matched, missing, extra, changed int64
	// samples are the smallest keys of each kind, in keyBytes order.
	samples [3][][]byte
	// maybeExtra are keys whose lake winner is in the window and which
	// have no source row in it: their lake records, to read back.
	maybeExtra []record
}

// add adds what another judge found.
func (c *comparison) add(o *comparison) {
	c.matched += o.matched
	c.missing += o.missing
	c.extra += o.extra
	c.changed += o.changed
	for kind, keys := range o.samples {
		for _, k := range keys {
			c.sample(kind, k)
		}
	}
	c.maybeExtra = append(c.maybeExtra, o.maybeExtra...)
}

func (c *comparison) sample(kind int, key []byte) {
	s := c.samples[kind]
	if len(s) == Samples && bytes.Compare(key, s[len(s)-1]) >= 0 {
		return
	}
	i := sort.Search(len(s), func(i int) bool { return bytes.Compare(s[i], key) >= 0 })
	s = slices.Insert(s, i, bytes.Clone(key))
	if len(s) > Samples {
		s = s[:Samples]
	}
	c.samples[kind] = s
}

// A judge compares partitions one at a time within its share of the
// budget, reusing its buffers from one partition to the next.
type judge struct {
	r *runner
	// share is fixed by a test, or 0: the budget now, shared by judges.
	share  int64
	judges int
	c      *comparison
	// The records of one partition of each side and the bytes they alias.
	srcRecs, lakeRecs []record
	srcData, lakeData []byte
}

// partition compares partition i of both sides, or splits it again when
// it does not fit the share.
func (j *judge) partition(ctx context.Context, src, lake *partitions, i, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, c := j.r, j.c
	size := src.bytes[i] + lake.bytes[i]
	if size == 0 {
		return nil
	}
	share := j.share
	if share == 0 {
		share = r.mem.measure() / int64(j.judges)
	}
	if size*3 > share && depth < 4 {
		return j.split(ctx, src, lake, i, depth)
	}
	var err error
	if j.lakeRecs, j.lakeData, err = lake.read(i, j.lakeRecs, j.lakeData); err != nil {
		return err
	}
	lake.drop(i)
	winners := r.winners(j.lakeRecs)
	if j.srcRecs, j.srcData, err = src.read(i, j.srcRecs, j.srcData); err != nil {
		return err
	}
	src.drop(i)
	srcRecs := j.srcRecs
	slices.SortFunc(srcRecs, func(a, b record) int { return bytes.Compare(a.key, b.key) })
	for k := 1; k < len(srcRecs); k++ {
		if bytes.Equal(srcRecs[k].key, srcRecs[k-1].key) {
			return fmt.Errorf("reconcile %s: the source holds a key twice (%s): the key is not unique", r.opts.Model, r.describeKey(srcRecs[k].key))
		}
	}
	// Merge the two sorted lists.
	a, b := 0, 0
	for a < len(srcRecs) || b < len(winners) {
		switch {
		case b == len(winners) || a < len(srcRecs) && bytes.Compare(srcRecs[a].key, winners[b].key) < 0:
			s := &srcRecs[a]
			a++
			if err := r.differ(c, kindMissing, s, nil); err != nil {
				return err
			}
		case a == len(srcRecs) || bytes.Compare(srcRecs[a].key, winners[b].key) > 0:
			l := &winners[b]
			b++
			if l.deleted() || !r.window.holds(l) {
				continue // not in the lake, or not judged
			}
			if !r.window.open() {
				l.key = bytes.Clone(l.key) // the buffer is reused
				c.maybeExtra = append(c.maybeExtra, *l)
				continue
			}
			if err := r.differ(c, kindExtra, nil, l); err != nil {
				return err
			}
		default:
			s, l := &srcRecs[a], &winners[b]
			a, b = a+1, b+1
			switch {
			case l.deleted():
				err = r.differ(c, kindMissing, s, l)
			case s.hash != l.hash:
				err = r.differ(c, kindChanged, s, l)
			default:
				c.matched++
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// winners sorts the lake's records by key and keeps each key's newest
// version by dedupe's rule.
func (r *runner) winners(recs []record) []record {
	slices.SortFunc(recs, func(a, b record) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		switch {
		case newer(&a, &b):
			return -1
		case newer(&b, &a):
			return 1
		}
		return 0
	})
	out := recs[:0]
	for j := range recs {
		if j > 0 && bytes.Equal(recs[j].key, recs[j-1].key) {
			continue
		}
		out = append(out, recs[j])
	}
	return out
}

// split spreads partition i of both sides over new partitions with
// another seed, and judges each.
func (j *judge) split(ctx context.Context, src, lake *partitions, i, depth int) error {
	r := j.r
	const ways = 16
	seed := uint64(depth + 1)
	sub := func(p *partitions, name string) (*partitions, error) {
		q, err := newPartitions(r.spill, fmt.Sprintf("%s-%d", name, depth+1), ways, seed, 1<<20)
		if err != nil {
			return nil, err
		}
		if err := p.each(i, q.add); err != nil {
			q.close()
			return nil, err
		}
		p.drop(i)
		return q, q.finish()
	}
	s2, err := sub(src, "source")
	if s2 != nil {
		defer s2.close()
	}
	if err != nil {
		return err
	}
	l2, err := sub(lake, "lake")
	if l2 != nil {
		defer l2.close()
	}
	if err != nil {
		return err
	}
	for k := range ways {
		if err := j.partition(ctx, s2, l2, k, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// differ counts one difference and, for a repair, spills it: the kind, the
// lake winner's modified-at and its key.
func (r *runner) differ(c *comparison, kind int, s, l *record) error {
	var key []byte
	if s != nil {
		key = s.key
	} else {
		key = l.key
	}
	switch kind {
	case kindMissing:
		c.missing++
	case kindExtra:
		c.extra++
	case kindChanged:
		c.changed++
	}
	c.sample(kind, key)
	if r.diffW == nil {
		return nil
	}
	r.diffMu.Lock()
	defer r.diffMu.Unlock()
	d := record{flags: byte(kind) << 4, key: key}
	if l != nil {
		d.flags |= l.flags & flagModNull
		d.mod, d.version = l.mod, l.version
	} else {
		d.flags |= flagModNull // no lake version to beat
	}
	r.diffBuf = d.append(r.diffBuf[:0])
	if _, err := r.diffW.Write(r.diffBuf); err != nil {
		return fmt.Errorf("write a spill file: %w", err)
	}
	return nil
}

// readSource reads the source in key order, within the window, and
// spills a record of each row.
func (r *runner) readSource(ctx context.Context, parts *partitions) error {
	ks := r.src.NewKeyScanner(r.table, r.selectExprs())
	ks.PageSize = pgsource.PagesOf(r.opts.PageRows)
	h := newWireHasher(&r.shape, r.mapping)
	var rec record
	err := ks.Scan(ctx, pgsource.Window{From: r.window.fromLit, To: r.window.toLit}, func(sr *pgsource.Row) error {
		if err := h.record(&rec, sr.Values); err != nil {
			return err
		}
		r.opts.Progress.Add(1)
		if parts.rows%measureRows == 0 {
			r.mem.measure()
		}
		return parts.add(&rec)
	})
	if err != nil {
		return fmt.Errorf("read the source of %s: %w", r.opts.Model, err)
	}
	return nil
}

// selectExprs are the export's, or with KeysOnly the key and modified-at
// columns only (NULL for the others).
func (r *runner) selectExprs() []string {
	exprs := r.mapping.SelectExprs(r.table.Quoted())
	if !r.opts.KeysOnly {
		return exprs
	}
	keep := map[int]bool{r.table.ModColumn(): true}
	for _, i := range r.table.KeyColumns() {
		keep[i] = true
	}
	for i := range exprs {
		if !keep[i] {
			exprs[i] = "NULL"
		}
	}
	return exprs
}

// sampleTexts renders sample keys as literals of the key columns' types.
func (r *runner) sampleTexts(keys [][]byte) ([][]string, error) {
	out := [][]string{}
	for _, k := range keys {
		t, err := r.keyText(k)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (r *runner) describeKey(key []byte) string {
	t, err := r.keyText(key)
	if err != nil {
		return "(unreadable key)"
	}
	return "(" + strings.Join(t, ", ") + ")"
}

func (r *runner) discard(files []manifest.File) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range files {
		_ = r.bucket.Delete(ctx, r.log.Key(f.Key))
	}
}

// commit appends the reconcile to the log. A repair's plan must still be
// live (manifest.Kills: only a full refresh, which replaces the files it
// was judged against, kills it); a report alone rebases over anything.
func (r *runner) commit(ctx context.Context, p *manifest.Plan, added []manifest.File) error {
	rep := r.res.Report
	c, _, err := r.log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		c := &manifest.Commit{Kind: manifest.KindReconcile, Identity: *st.Identity, Watermark: st.Watermark, FromFloor: st.FromFloor,
			Reconcile: &rep, Warnings: r.res.Warnings}
		if p != nil {
			if err := r.log.Live(ctx, st, p); err != nil {
				return nil, fmt.Errorf("reconcile %s: %w; run the reconcile again", r.opts.Model, err)
			}
			c.RunID, c.Added, c.Schema = p.RunID, added, st.Schema
			var bytes int64
			for _, f := range added {
				bytes += f.Bytes
			}
			c.Metrics = &manifest.Metrics{RowsTransferred: rep.RepairedRows + rep.Tombstones, Files: int64(len(added)), Bytes: bytes}
		}
		return c, nil
	})
	if err != nil {
		return err
	}
	r.res.Commit = c
	r.logger.Info("reconcile committed", "seq", c.Seq, "added", len(added))
	return nil
}
