package dedupe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"sync/atomic"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
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
	part      *outPart
	batch     []parquet.Row
	batchData []byte
	batchRecs []int // offsets of the batch's records in batchData
}

type outPart struct {
	file     manifest.File
	w        formats.FileWriter
	pipe     *io.PipeWriter
	sum      hash.Hash
	n        int64
	done     chan error
	cancel   context.CancelFunc
	rawInRG  int64
	min, max int64
	anyMod   bool
}

func (p *outPart) Write(b []byte) (int, error) {
	n, err := p.pipe.Write(b)
	p.sum.Write(b[:n])
	p.n += int64(n)
	return n, err
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
	p.rawInRG += int64(len(recRow(rec)))
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
	if _, err := p.w.WriteRows(o.batch); err != nil {
		return fmt.Errorf("write %s: %w", p.file.Key, err)
	}
	p.file.Rows += int64(len(o.batch))
	o.batchRecs, o.batchData = o.batchRecs[:0], o.batchData[:0]
	if p.rawInRG >= o.rowGroup {
		if err := p.w.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", p.file.Key, err)
		}
		p.rawInRG = 0
		if p.n >= o.target {
			return o.closePart()
		}
	}
	return nil
}

func (o *outputs) open(bucket int) error {
	ctx, cancel := context.WithCancel(o.ctx)
	pr, pw := io.Pipe()
	key := manifest.DataKey(o.runID, o.attempt, int(o.seq.Add(1)))
	b := bucket
	p := &outPart{file: manifest.File{Key: key, SchemaID: o.schemaID, Bucket: &b}, pipe: pw, sum: sha256.New(),
		done: make(chan error, 1), cancel: cancel}
	go func() {
		err := o.bucket.Put(ctx, o.log.Key(key), pr, objstore.PutOptions{ContentType: "application/vnd.apache.parquet"})
		pr.CloseWithError(fmt.Errorf("upload ended: %v", err))
		p.done <- err
	}()
	kv := map[string]string{"highwater.bucket": fmt.Sprint(bucket)}
	for k, v := range o.kv {
		kv[k] = v
	}
	w, err := formats.NewSchemaWriter(p, o.schema, formats.WriterOptions{Codec: o.codec, KeyValue: kv, Build: o.build})
	if err != nil {
		p.abort()
		return fmt.Errorf("start %s: %w", key, err)
	}
	p.w = w
	o.part = p
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
		p.abort()
		return fmt.Errorf("finish %s: %w", p.file.Key, err)
	}
	p.pipe.Close()
	err := <-p.done
	p.cancel()
	if err != nil {
		return fmt.Errorf("upload %s: %w", p.file.Key, err)
	}
	p.file.Bytes = p.n
	p.file.SHA256 = hex.EncodeToString(p.sum.Sum(nil))
	o.files = append(o.files, p.file)
	o.bytesOut += p.n
	o.rowsOut += p.file.Rows
	return nil
}

// abort stops every upload in flight; the store keeps nothing of them.
func (o *outputs) abort() {
	if o.part != nil {
		o.part.abort()
		o.part = nil
	}
}

func (p *outPart) abort() {
	p.cancel()
	p.pipe.CloseWithError(context.Canceled)
	<-p.done
}
