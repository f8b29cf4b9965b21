// Package synth writes synthetic exports of a table
// items(id bigint, updated_at timestamptz, name text, price numeric(12,2))
// straight into a lake, for tests and benchmarks of dedupe that need more
// rows than a PostgreSQL export makes quickly. Files and commits look
// exactly like an export's.
package synth

import (
	"context"
	"fmt"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/parquet-go/parquet-go"
)

// PostgreSQL type OIDs of the columns.
const (
	oidInt8        = 20
	oidText        = 25
	oidTimestamptz = 1184
	oidNumeric     = 1700
)

// Columns of the synthetic table.
var Columns = []formats.Column{
	{Name: "id", TypeOID: oidInt8, Typmod: -1, TypeName: "bigint", TypType: 'b', NotNull: true},
	{Name: "updated_at", TypeOID: oidTimestamptz, Typmod: -1, TypeName: "timestamp with time zone", TypType: 'b'},
	{Name: "name", TypeOID: oidText, Typmod: -1, TypeName: "text", TypType: 'b'},
	{Name: "price", TypeOID: oidNumeric, Typmod: (12<<16 | 2) + 4, TypeName: "numeric(12,2)", TypType: 'b'},
}

// Row is one version of a row.
type Row struct {
	ID        int64
	UpdatedAt int64 // µs since the Unix epoch
	Name      string
	Price     int64 // cents
	Deleted   bool
}

// Lake writes exports of one model.
type Lake struct {
	dest    objstore.Bucket
	log     *manifest.Log
	mapping *formats.Mapping
	schema  *manifest.Schema
	id      manifest.Identity
	// TargetFileBytes rolls files; RowGroupRows ends row groups.
	TargetFileBytes int64
	RowGroupRows    int64
	Lookback        time.Duration
}

// New prepares model in the lake rooted at dest.
func New(dest objstore.Bucket, model string) (*Lake, error) {
	m, err := formats.NewMapping(Columns, formats.Options{})
	if err != nil {
		return nil, fmt.Errorf("map synthetic columns: %w", err)
	}
	return &Lake{
		dest: dest, log: manifest.NewLog(dest, model), mapping: m,
		schema: manifest.NewSchema(m.Fields(), Columns),
		id: manifest.Identity{SystemID: "synthetic", Database: "synth", Relation: "public.items",
			PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"},
		TargetFileBytes: 64 << 20, RowGroupRows: 100_000, Lookback: watermark.DefaultLookback,
	}, nil
}

// Export writes n rows from gen as one committed export run whose
// watermark is just past the greatest updated_at. Rows are written in the
// order gen makes them.
func (l *Lake) Export(ctx context.Context, n int, gen func(i int, r *Row)) (*manifest.Commit, error) {
	st, err := l.log.ReadState(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	p := &manifest.Plan{RunID: manifest.NewRunID(now), Model: l.log.Model(), Kind: manifest.KindExport, Identity: l.id,
		PrevWatermark: st.Watermark, BaseSeq: st.Seq, Lookback: l.Lookback.String(), HWVersion: now.UnixMicro(), Created: now.UTC()}
	attempt := manifest.NewID()[:12]
	var files []manifest.File
	var maxMod int64
	var part *part
	closePart := func() error {
		f, err := part.close()
		part = nil
		files = append(files, f)
		return err
	}
	defer func() {
		if part != nil {
			part.up.Abort()
		}
	}()
	var r Row
	row := make(parquet.Row, 0, 6)
	batch := []parquet.Row{nil}
	for i := range n {
		if part == nil {
			key := manifest.DataKey(p.RunID, attempt, len(files)+1)
			if part, err = l.openPart(ctx, key); err != nil {
				return nil, err
			}
		}
		r = Row{}
		gen(i, &r)
		row = append(row[:0],
			parquet.Int64Value(r.ID).Level(0, 1, 0),
			parquet.Int64Value(r.UpdatedAt).Level(0, 1, 1),
			parquet.ByteArrayValue([]byte(r.Name)).Level(0, 1, 2),
			parquet.Int64Value(r.Price).Level(0, 1, 3),
			parquet.Int64Value(p.HWVersion).Level(0, 0, 4),
			parquet.BooleanValue(r.Deleted).Level(0, 0, 5))
		batch[0] = row
		// The raw size as an export counts it: each source value with its
		// 4-byte length, the numeric taken at 8 bytes.
		if err := part.fw.Write(batch, int64(3*(8+4)+len(r.Name)+4)); err != nil {
			return nil, err
		}
		part.add(r.UpdatedAt)
		maxMod = max(maxMod, r.UpdatedAt)
		if part.fw.EstimatedSize() >= l.TargetFileBytes {
			if err := closePart(); err != nil {
				return nil, err
			}
		}
	}
	if part != nil {
		if err := closePart(); err != nil {
			return nil, err
		}
	}
	wm := watermark.Format(watermark.Timestamptz, watermark.Value(maxMod+1))
	if st.Watermark != nil && *st.Watermark > wm {
		wm = *st.Watermark
	}
	p.Interval = manifest.Interval{From: st.Watermark, To: wm}
	if err := l.log.WritePlan(ctx, p); err != nil {
		return nil, err
	}
	c := &manifest.Commit{Kind: manifest.KindExport, RunID: p.RunID, Identity: l.id, Interval: &p.Interval, ToBound: "clock",
		Watermark: &wm, Added: files, Schema: l.schema, Metrics: &manifest.Metrics{RowsTransferred: int64(n), Files: int64(len(files))}}
	if err := l.log.Commit(ctx, st, c); err != nil {
		return nil, err
	}
	return c, nil
}

// part is one file of an export, streamed to the store as it is written.
type part struct {
	file     manifest.File
	up       *objstore.Upload
	fw       *formats.FileWriter
	min, max int64
}

func (l *Lake) openPart(ctx context.Context, key string) (*part, error) {
	up := objstore.NewUpload(ctx, l.dest, l.log.Key(key), objstore.PutOptions{ContentType: formats.ContentType})
	fw, err := formats.NewFileWriter(up, l.mapping.Schema(), formats.WriterOptions{RowGroupRows: l.RowGroupRows})
	if err != nil {
		up.Abort()
		return nil, fmt.Errorf("start %s: %w", key, err)
	}
	return &part{file: manifest.File{Key: key, SchemaID: l.schema.ID}, up: up, fw: fw}, nil
}

func (p *part) add(updatedAt int64) {
	if p.file.Rows == 0 || updatedAt < p.min {
		p.min = updatedAt
	}
	if p.file.Rows == 0 || updatedAt > p.max {
		p.max = updatedAt
	}
	p.file.Rows++
}

func (p *part) close() (manifest.File, error) {
	if err := p.fw.Close(); err != nil {
		p.up.Abort()
		return manifest.File{}, fmt.Errorf("finish %s: %w", p.file.Key, err)
	}
	var err error
	if p.file.Bytes, p.file.SHA256, err = p.up.Close(); err != nil {
		return manifest.File{}, fmt.Errorf("upload %s: %w", p.file.Key, err)
	}
	lo, hi := watermark.Format(watermark.Timestamptz, watermark.Value(p.min)), watermark.Format(watermark.Timestamptz, watermark.Value(p.max))
	p.file.MinModifiedAt, p.file.MaxModifiedAt = &lo, &hi
	return p.file, nil
}
