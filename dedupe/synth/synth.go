// Package synth writes synthetic exports of a table
// items(id bigint, updated_at timestamptz, name text, price numeric(12,2))
// straight into a lake, for tests and benchmarks of dedupe that need more
// rows than a PostgreSQL export makes quickly. Files and commits look
// exactly like an export's.
package synth

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/destination"
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
	dest    *destination.Destination
	log     *manifest.Log
	mapping formats.Mapping
	schema  *manifest.Schema
	id      manifest.Identity
	// TargetFileBytes rolls files; RowGroupRows ends row groups.
	TargetFileBytes int64
	RowGroupRows    int64
	Lookback        time.Duration
}

// New prepares model in dest.
func New(dest *destination.Destination, model string) (*Lake, error) {
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
	var fw formats.FileWriter
	var tmp *os.File
	var fileRows int64
	var minF, maxF int64
	closeFile := func() error {
		if err := fw.Close(); err != nil {
			return err
		}
		size, _ := tmp.Seek(0, io.SeekCurrent)
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		key := manifest.DataKey(p.RunID, attempt, len(files)+1)
		if err := l.dest.Put(ctx, l.log.Key(key), tmp, objstoreOpts); err != nil {
			return fmt.Errorf("upload %s: %w", key, err)
		}
		lo, hi := watermark.Format(watermark.Timestamptz, watermark.Value(minF)), watermark.Format(watermark.Timestamptz, watermark.Value(maxF))
		files = append(files, manifest.File{Key: key, Rows: fileRows, Bytes: size, SchemaID: l.schema.ID, MinModifiedAt: &lo, MaxModifiedAt: &hi})
		tmp.Close()
		os.Remove(tmp.Name())
		fw, fileRows = nil, 0
		return nil
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	var r Row
	row := make(parquet.Row, 0, 6)
	for i := range n {
		if fw == nil {
			if tmp, err = os.CreateTemp("", "synth-*.parquet"); err != nil {
				return nil, err
			}
			if fw, err = formats.NewFileWriter(tmp, l.mapping, formats.WriterOptions{RowGroupRows: l.RowGroupRows}); err != nil {
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
		if _, err := fw.WriteRows([]parquet.Row{row}); err != nil {
			return nil, err
		}
		if fileRows == 0 || r.UpdatedAt < minF {
			minF = r.UpdatedAt
		}
		if fileRows == 0 || r.UpdatedAt > maxF {
			maxF = r.UpdatedAt
		}
		fileRows++
		maxMod = max(maxMod, r.UpdatedAt)
		if fileRows%10_000 == 0 {
			if size, _ := tmp.Seek(0, io.SeekCurrent); size+fw.BufferedBytes()/3 >= l.TargetFileBytes {
				if err := closeFile(); err != nil {
					return nil, err
				}
			}
		}
	}
	if fw != nil {
		if err := closeFile(); err != nil {
			return nil, err
		}
	}
	tmp = nil
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
