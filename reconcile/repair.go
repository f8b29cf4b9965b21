package reconcile

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// repairBatch is how many keys one keyed read asks for.
const repairBatch = 1000

// resolveExtra reads back by key the lake's keys that a window found in
// the lake and not in the source: a key the source still holds, with a
// modified-at outside the window, is changed; the others are extra.
func (r *runner) resolveExtra(ctx context.Context, c *comparison) error {
	ks := r.src.NewKeyScanner(r.table, r.mapping.SelectExprs(r.table.Quoted()))
	h := &hasher{sh: &r.shape}
	ncols := len(r.table.Columns) + 2
	for len(c.maybeExtra) > 0 {
		n := min(len(c.maybeExtra), repairBatch)
		batch := c.maybeExtra[:n]
		c.maybeExtra = c.maybeExtra[n:]
		texts := make([][]string, len(batch))
		for i := range batch {
			t, err := r.keyText(batch[i].key)
			if err != nil {
				return err
			}
			texts[i] = t
		}
		found := map[string]bool{}
		var row parquet.Row
		var rec record
		err := ks.Read(ctx, texts, func(sr *pgsource.Row) error {
			var err error
			if row, err = r.mapping.AppendRow(row, sr.Values, 0, false); err != nil {
				return fmt.Errorf("convert row: %w", err)
			}
			h.record(&rec, row, ncols)
			found[string(rec.key)] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the source of %s by key: %w", r.opts.Model, err)
		}
		for i := range batch {
			l := &batch[i]
			kind := kindExtra
			if found[string(l.key)] {
				kind = kindChanged
			}
			if err := r.differ(c, kind, nil, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// repair writes the files that make the lake equal to the source: the
// missing and changed rows read again by key, as versions newer than any
// in the lake, and tombstones of the extra keys.
func (r *runner) repair(ctx context.Context) (*manifest.Plan, []manifest.File, error) {
	now, err := r.src.ClockMicros(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Newer than every version in the lake, so that it wins a tie on
	// modified-at whatever the clocks did.
	version := max(now, r.maxVersion+1)
	p := &manifest.Plan{RunID: manifest.NewRunID(time.Now()), Model: r.opts.Model, Kind: manifest.KindReconcile, Identity: r.id,
		PrevWatermark: r.st.Watermark, BaseSeq: r.st.Seq, HWVersion: version, Created: time.Now().UTC()}
	if err := r.log.WritePlan(ctx, p); err != nil {
		return nil, nil, err
	}
	codec, err := formats.NewCodec(r.opts.Compression)
	if err != nil {
		return nil, nil, err
	}
	w := &repairWriter{r: r, ctx: ctx, runID: p.RunID, attempt: manifest.NewID()[:12], codec: codec}
	if err := r.writeRepair(ctx, w, version); err != nil {
		w.abort()
		r.discard(w.files)
		return nil, nil, err
	}
	if err := w.close(); err != nil {
		r.discard(w.files)
		return nil, nil, err
	}
	r.res.Report.Repaired = true
	return p, w.files, nil
}

type diffEntry struct {
	kind int
	lake record // the lake winner's modified-at and version, and the key
}

func (r *runner) writeRepair(ctx context.Context, w *repairWriter, version int64) error {
	if _, err := r.diffs.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read a spill file: %w", err)
	}
	br := bufio.NewReaderSize(r.diffs, 64<<10)
	ks := r.src.NewKeyScanner(r.table, r.mapping.SelectExprs(r.table.Quoted()))
	var batch []diffEntry
	flush := func() error {
		err := r.repairBatch(ctx, ks, w, batch, version)
		batch = batch[:0]
		return err
	}
	for {
		l, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read a spill file: %w", err)
		}
		body := make([]byte, l)
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("read a spill file: %w", err)
		}
		var rec record
		if err := parseRecord(&rec, body); err != nil {
			return err
		}
		kind := int(rec.flags >> 4)
		rec.flags &= flagModNull
		if kind == kindExtra {
			if err := w.add(r.tombstone(&rec, version)); err != nil {
				return err
			}
			r.res.Report.Tombstones++
			continue
		}
		batch = append(batch, diffEntry{kind: kind, lake: rec})
		if len(batch) == repairBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// repairBatch reads one batch of missing and changed keys again and
// writes what the source holds now: the row, or a tombstone for a key
// deleted since that the lake still holds.
func (r *runner) repairBatch(ctx context.Context, ks *pgsource.KeyScanner, w *repairWriter, batch []diffEntry, version int64) error {
	if len(batch) == 0 {
		return nil
	}
	r.mem.measure() // the writer's encoders run for the first time
	texts := make([][]string, len(batch))
	byKey := make(map[string]*diffEntry, len(batch))
	for i := range batch {
		t, err := r.keyText(batch[i].lake.key)
		if err != nil {
			return err
		}
		texts[i] = t
		byKey[string(batch[i].lake.key)] = &batch[i]
	}
	h := &hasher{sh: &r.shape}
	ncols := len(r.table.Columns) + 2
	seen := map[string]bool{}
	var rec record
	err := ks.Read(ctx, texts, func(sr *pgsource.Row) error {
		row, err := r.mapping.AppendRow(nil, sr.Values, version, false)
		if err != nil {
			return fmt.Errorf("convert row: %w", err)
		}
		h.record(&rec, row, ncols)
		d := byKey[string(rec.key)]
		if d == nil {
			return nil // a key equal to one asked for by its type, not in bytes
		}
		seen[string(rec.key)] = true
		// A version wins by (modified_at, _hw_version): one whose
		// modified-at is older than the lake's newest cannot, whatever its
		// version, and writing it would change nothing.
		if !d.lake.modNull() && (rec.modNull() || rec.mod < d.lake.mod) {
			r.res.Report.Unrepaired++
			if r.res.Report.Unrepaired <= Samples {
				r.warnf("key %s: the source's modified-at is older than the lake's newest version, which therefore keeps winning: only a --full-refresh export repairs it", r.describeKey(rec.key))
			}
			return nil
		}
		r.res.Report.RepairedRows++
		return w.add(row)
	})
	if err != nil {
		return fmt.Errorf("read the source of %s by key: %w", r.opts.Model, err)
	}
	for i := range batch {
		d := &batch[i]
		if seen[string(d.lake.key)] {
			continue
		}
		// Deleted from the source since it was compared, or a key whose
		// literal, made from the lake's value, no longer finds its row (a
		// date at infinity is held as 9999-12-31): a tombstone could remove
		// a live row, so the next reconcile judges it again.
		r.res.Report.Unrepaired++
		if r.res.Report.Unrepaired <= Samples {
			r.warnf("key %s was not found again by key: deleted since, or its type's literal does not find it; run reconcile again", r.describeKey(d.lake.key))
		}
	}
	return nil
}

// tombstone builds the row that removes the key of lake record l: its
// key, the lake winner's modified-at (so that a later version still wins
// over it), a newer version and _hw_deleted.
func (r *runner) tombstone(l *record, version int64) parquet.Row {
	vals, err := decodeKey(l.key, len(r.shape.key))
	if err != nil {
		panic(fmt.Sprintf("decode a key this run encoded: %v", err)) // our own encoding
	}
	n := len(r.table.Columns)
	row := make(parquet.Row, 0, n+2)
	for c := range n {
		row = append(row, parquet.Value{}.Level(0, 0, c))
	}
	for j, c := range r.shape.key {
		row[c] = vals[j].Level(0, 1, c)
	}
	if !l.modNull() {
		m := parquet.Int64Value(l.mod)
		if r.mapping.Fields()[r.shape.mod].Logical == "DATE" {
			m = parquet.Int32Value(int32(l.mod))
		}
		row[r.shape.mod] = m.Level(0, 1, r.shape.mod)
	}
	return append(row, parquet.Int64Value(version).Level(0, 0, n), parquet.BooleanValue(true).Level(0, 0, n+1))
}

// repairWriter writes the repair's rows into files rolled at the target
// size, each streamed to the store while it is written.
type repairWriter struct {
	r       *runner
	ctx     context.Context
	runID   string
	attempt string
	codec   compress.Codec
	up      *objstore.Upload
	fw      *formats.FileWriter
	file    manifest.File
	files   []manifest.File
	rows    []parquet.Row
}

func (w *repairWriter) add(row parquet.Row) error {
	w.rows = append(w.rows, row)
	if len(w.rows) < 1024 {
		return nil
	}
	return w.flush()
}

func (w *repairWriter) flush() error {
	if len(w.rows) == 0 {
		return nil
	}
	r := w.r
	if w.fw == nil {
		key := manifest.DataKey(w.runID, w.attempt, len(w.files))
		w.up = objstore.NewUpload(w.ctx, r.bucket, r.log.Key(key), objstore.PutOptions{ContentType: formats.ContentType})
		kv := map[string]string{manifest.MetaModel: r.opts.Model, manifest.MetaRunID: w.runID, manifest.MetaKind: manifest.KindReconcile,
			manifest.MetaFormatVersion: fmt.Sprint(manifest.FormatVersion)}
		fw, err := formats.NewFileWriter(w.up, r.mapping.Schema(), formats.WriterOptions{Codec: w.codec, RowGroupBytes: 16 << 20, KeyValue: kv, Build: r.opts.Build})
		if err != nil {
			w.up.Abort()
			w.up = nil
			return fmt.Errorf("start %s: %w", key, err)
		}
		w.fw, w.file = fw, manifest.File{Key: key, SchemaID: r.st.Schema.ID}
	}
	var raw int64
	for _, row := range w.rows {
		for _, v := range row {
			raw += 8
			if k := v.Kind(); !v.IsNull() && (k == parquet.ByteArray || k == parquet.FixedLenByteArray) {
				raw += int64(len(v.ByteArray()))
			}
		}
	}
	if err := w.fw.Write(w.rows, raw); err != nil {
		return fmt.Errorf("write %s: %w", w.file.Key, err)
	}
	w.file.Rows += int64(len(w.rows))
	w.rows = w.rows[:0]
	if w.fw.EstimatedSize() >= r.opts.TargetFileBytes {
		return w.closePart()
	}
	return nil
}

func (w *repairWriter) closePart() error {
	if w.fw == nil {
		return nil
	}
	fw, up := w.fw, w.up
	w.fw, w.up = nil, nil
	if err := fw.Close(); err != nil {
		up.Abort()
		return fmt.Errorf("finish %s: %w", w.file.Key, err)
	}
	var err error
	if w.file.Bytes, w.file.SHA256, err = up.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", w.file.Key, err)
	}
	w.files = append(w.files, w.file)
	return nil
}

func (w *repairWriter) close() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.closePart()
}

func (w *repairWriter) abort() {
	if w.up != nil {
		w.up.Abort()
	}
}
