package dedupe

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/progress"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// outputs writes the winners of one run into files of one schema, each
// streamed to the store while it is encoded.
type outputs struct {
	ctx       context.Context
	bucket    objstore.Bucket
	log       *manifest.Log
	schema    *parquet.Schema
	schemaID  string
	codec     compress.Codec
	kv        map[string]string
	build     formats.Build
	runID     string
	attempt   string
	seq       *atomic.Int64 // numbers the files of all workers
	target    int64
	rowGroup  int64
	modKind   watermark.Kind
	files     []manifest.File
	bytesOut  int64
	rowsOut   int64
	progress  *progress.Counter
	part      *outPart
	batch     []parquet.Row
	batchData []byte
	batchRecs []int // offsets of the batch's records in batchData
}

type outPart struct {
	file     manifest.File
	up       *objstore.Upload
	w        *formats.FileWriter
	min, max int64
	anyMod   bool
}

const batchRows = 256

// add queues one winning record for the given bucket's current file.
func (o *outputs) add(bucket int, rec []byte) error {
	if o.part == nil {
		if err := o.open(bucket); err != nil {
			return err
		}
	}
	p := o.part
	if recFlags(rec)&flagModNull == 0 {
		m := recMod(rec)
		if !p.anyMod || m < p.min {
			p.min = m
		}
		if !p.anyMod || m > p.max {
			p.max = m
		}
		p.anyMod = true
	}
	o.batchRecs = append(o.batchRecs, len(o.batchData))
	o.batchData = append(o.batchData, recRow(rec)...)
	// Wide rows end a batch early: 256 rows of 50 MB would be 12 GB.
	if len(o.batchRecs) == batchRows || int64(len(o.batchData)) >= o.rowGroup {
		return o.flushBatch()
	}
	return nil
}

func (o *outputs) flushBatch() error {
	p := o.part
	if p == nil || len(o.batchRecs) == 0 {
		return nil
	}
	o.batch = o.batch[:0]
	for i, off := range o.batchRecs {
		end := len(o.batchData)
		if i+1 < len(o.batchRecs) {
			end = o.batchRecs[i+1]
		}
		var row parquet.Row
		if len(o.batch) < cap(o.batch) {
			row = o.batch[:len(o.batch)+1][len(o.batch)][:0]
		}
		row, err := decodeRow(row, o.batchData[off:end])
		if err != nil {
			return err
		}
		o.batch = append(o.batch, row)
	}
	if err := p.w.Write(o.batch, int64(len(o.batchData))); err != nil {
		return fmt.Errorf("write %s: %w", p.file.Key, err)
	}
	p.file.Rows += int64(len(o.batch))
	o.batchRecs, o.batchData = o.batchRecs[:0], o.batchData[:0]
	// Files roll only where a row group has just ended: there nothing is
	// buffered, and the estimate is the bytes written.
	if p.w.BufferedBytes() == 0 && p.w.EstimatedSize() >= o.target {
		return o.closePart()
	}
	return nil
}

func (o *outputs) open(bucket int) error {
	key := manifest.DataKey(o.runID, o.attempt, int(o.seq.Add(1)))
	up := objstore.NewUpload(o.ctx, o.bucket, o.log.Key(key), objstore.PutOptions{ContentType: formats.ContentType})
	kv := map[string]string{manifest.MetaBucket: fmt.Sprint(bucket)}
	for k, v := range o.kv {
		kv[k] = v
	}
	w, err := formats.NewFileWriter(up, o.schema, formats.WriterOptions{Codec: o.codec, RowGroupBytes: o.rowGroup, KeyValue: kv, Build: o.build})
	if err != nil {
		up.Abort()
		return fmt.Errorf("start %s: %w", key, err)
	}
	b := bucket
	o.part = &outPart{file: manifest.File{Key: key, SchemaID: o.schemaID, Bucket: &b}, up: up, w: w}
	return nil
}

// endBucket closes the bucket's last file: files never span buckets.
func (o *outputs) endBucket() error {
	if o.part == nil {
		return nil
	}
	if err := o.flushBatch(); err != nil {
		return err
	}
	if o.part == nil {
		return nil
	}
	return o.closePart()
}

func (o *outputs) closePart() error {
	p := o.part
	o.part = nil
	if p.anyMod {
		lo, hi := watermark.Format(o.modKind, watermark.Value(p.min)), watermark.Format(o.modKind, watermark.Value(p.max))
		p.file.MinModifiedAt, p.file.MaxModifiedAt = &lo, &hi
	}
	if err := p.w.Close(); err != nil {
		p.up.Abort()
		return fmt.Errorf("finish %s: %w", p.file.Key, err)
	}
	var err error
	if p.file.Bytes, p.file.SHA256, err = p.up.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", p.file.Key, err)
	}
	o.files = append(o.files, p.file)
	o.bytesOut += p.file.Bytes
	o.rowsOut += p.file.Rows
	o.progress.AddFile(p.file.Bytes)
	return nil
}

// abort stops every upload in flight; the store keeps nothing of them.
func (o *outputs) abort() {
	if o.part != nil {
		o.part.up.Abort()
		o.part = nil
	}
}
