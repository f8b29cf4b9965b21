package export

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go/compress"
)

// partWriter streams one Parquet file to the store while it is written.
type partWriter struct {
	key  string // relative to the model's root
	up   *objstore.Upload
	fw   *formats.FileWriter
	file manifest.File
}

func openPart(ctx context.Context, b objstore.Bucket, log *manifest.Log, key string, m *formats.Mapping, codec compress.Codec, opts *Options, kv map[string]string) (*partWriter, error) {
	up := objstore.NewUpload(ctx, b, log.Key(key), objstore.PutOptions{ContentType: formats.ContentType})
	fw, err := formats.NewFileWriter(up, m.Schema(), formats.WriterOptions{Codec: codec, RowGroupRows: opts.RowGroupRows,
		RowGroupBytes: opts.RowGroupBytes, KeyValue: kv, Build: opts.Build})
	if err != nil {
		up.Abort()
		return nil, fmt.Errorf("start %s: %w", key, err)
	}
	return &partWriter{key: key, up: up, fw: fw, file: manifest.File{Key: key}}, nil
}

// write adds a batch; the file writer ends row groups at their bounds.
func (p *partWriter) write(b *batch) error {
	if p.file.First == nil {
		p.file.First = b.first
	}
	p.file.Last = b.last
	if b.deletesLast != nil {
		p.file.DeletesLast = b.deletesLast
	}
	p.file.Rows += int64(b.rows.Len())
	p.file.MinModifiedAt, p.file.MaxModifiedAt = minMax(p.file.MinModifiedAt, p.file.MaxModifiedAt, b.minMod, b.maxMod)
	if err := p.fw.WriteBatch(b.rows, b.raw); err != nil {
		return fmt.Errorf("write %s: %w", p.key, err)
	}
	return nil
}

// close writes the footer and waits until the store holds the whole file.
func (p *partWriter) close(lastKey *manifest.Cursor) (manifest.File, error) {
	lk, _ := json.Marshal(lastKey)
	p.fw.SetKeyValue(manifest.MetaLastKey, string(lk))
	if err := p.fw.Close(); err != nil {
		p.up.Abort()
		return manifest.File{}, fmt.Errorf("finish %s: %w", p.key, err)
	}
	var err error
	if p.file.Bytes, p.file.SHA256, err = p.up.Close(); err != nil {
		return manifest.File{}, fmt.Errorf("upload %s: %w", p.key, err)
	}
	return p.file, nil
}

// abort stops the upload; the store keeps nothing of it.
func (p *partWriter) abort() { p.up.Abort() }

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
	rows        *formats.Batch
	raw         int64
	first, last *manifest.Cursor
	// minMod and maxMod ignore NULLs, which sort first in a scan.
	minMod, maxMod *string
	metrics        manifest.Metrics
	// deletesLast is the delete log position of a batch of tombstones.
	deletesLast *manifest.Cursor
}
