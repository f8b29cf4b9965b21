package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// partWriter streams one Parquet file to the store while it is written:
// the encoder writes into a pipe that the store's Put reads, and the
// sha256 and size are taken on the way.
type partWriter struct {
	key    string // relative to the model's root
	fw     formats.FileWriter
	pipe   *io.PipeWriter
	sum    hash.Hash
	n      int64
	done   chan error
	cancel context.CancelFunc

	file     manifest.File
	rawInRG  int64 // raw bytes of the rows buffered in the current row group
	rowsInRG int64
	// rawFlushed and n give the compression ratio seen so far, to predict
	// the file's size from what is still buffered.
	rawFlushed int64
}

func (p *partWriter) Write(b []byte) (int, error) {
	n, err := p.pipe.Write(b)
	p.sum.Write(b[:n])
	p.n += int64(n)
	return n, err
}

func openPart(ctx context.Context, b objstore.Bucket, log *manifest.Log, key string, m formats.Mapping, codec compress.Codec, opts *Options, kv map[string]string) (*partWriter, error) {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	p := &partWriter{key: key, pipe: pw, sum: sha256.New(), done: make(chan error, 1), cancel: cancel}
	go func() {
		err := b.Put(ctx, log.Key(key), pr, objstore.PutOptions{ContentType: "application/vnd.apache.parquet"})
		// Unblock the encoder if the store gave up early.
		pr.CloseWithError(fmt.Errorf("upload ended: %v", err))
		p.done <- err
	}()
	fw, err := formats.NewFileWriter(p, m, formats.WriterOptions{Codec: codec, RowGroupRows: opts.RowGroupRows, KeyValue: kv, Build: opts.Build})
	if err != nil {
		p.abort()
		return nil, fmt.Errorf("start %s: %w", key, err)
	}
	p.fw = fw
	p.file = manifest.File{Key: key}
	return p, nil
}

// write adds a batch and ends the row group when it reaches its bounds.
func (p *partWriter) write(b *batch, opts *Options) error {
	if p.file.First == nil {
		p.file.First = b.first
	}
	p.file.Last = b.last
	p.file.Rows += int64(len(b.rows))
	p.file.MinModifiedAt, p.file.MaxModifiedAt = minMax(p.file.MinModifiedAt, p.file.MaxModifiedAt, b.minMod, b.maxMod)
	if _, err := p.fw.WriteRows(b.rows); err != nil {
		return fmt.Errorf("write %s: %w", p.key, err)
	}
	p.rawInRG += b.raw
	p.rowsInRG += int64(len(b.rows))
	if p.rawInRG >= opts.RowGroupBytes || p.rowsInRG >= opts.RowGroupRows {
		if err := p.fw.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", p.key, err)
		}
		p.rawFlushed += p.rawInRG
		p.rawInRG, p.rowsInRG = 0, 0
	}
	return nil
}

// expectedSize predicts the file's size if it were closed now.
func (p *partWriter) expectedSize() int64 {
	ratio := 0.5
	if p.rawFlushed > 0 {
		ratio = float64(p.n) / float64(p.rawFlushed)
	}
	return p.n + int64(float64(p.rawInRG)*ratio)
}

// close writes the footer and waits until the store holds the whole file.
func (p *partWriter) close(lastKey *manifest.Cursor) (manifest.File, error) {
	lk, _ := json.Marshal(lastKey)
	p.fw.SetKeyValue("highwater.last_key", string(lk))
	if err := p.fw.Close(); err != nil {
		p.abort()
		return manifest.File{}, fmt.Errorf("finish %s: %w", p.key, err)
	}
	p.pipe.Close()
	err := <-p.done
	p.cancel()
	if err != nil {
		return manifest.File{}, fmt.Errorf("upload %s: %w", p.key, err)
	}
	p.file.Bytes = p.n
	p.file.SHA256 = hex.EncodeToString(p.sum.Sum(nil))
	return p.file, nil
}

// abort stops the upload; the store keeps nothing of it.
func (p *partWriter) abort() {
	p.cancel()
	p.pipe.CloseWithError(context.Canceled)
	<-p.done
}

func minMax(lo, hi, blo, bhi *string) (*string, *string) {
	// Values of one column compare by their order in the scan, which is
	// ascending within a run; min is the first seen, max the last.
	if lo == nil {
		lo = blo
	}
	if bhi != nil {
		hi = bhi
	}
	return lo, hi
}

// batch is a run of consecutive rows, handed from the reader to the writer.
type batch struct {
	rows        []parquet.Row
	raw         int64
	first, last *manifest.Cursor
	// minMod and maxMod ignore NULLs, which sort first in a scan.
	minMod, maxMod *string
	metrics        manifest.Metrics
}
