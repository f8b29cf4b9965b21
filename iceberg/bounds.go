package iceberg

import (
	"encoding/binary"

	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// bounds gives a data file the lower and upper bounds of its modified-at
// column, which the log recorded when the file was written, so that engines
// skip files outside a time range without reading them. id 0: none.
type bounds struct {
	id   int
	kind watermark.Kind
}

// boundsOf finds the modified-at column in the schema that tx stages; a log
// written before the identity recorded the column's kind gets no bounds.
func boundsOf(tx *table.Transaction, id *manifest.Identity) bounds {
	if id == nil || id.ModifiedAtKind == "" {
		return bounds{}
	}
	kind, err := watermark.ParseKind(id.ModifiedAtKind)
	if err != nil {
		return bounds{}
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return bounds{}
	}
	f, ok := staged.Schema().FindFieldByName(id.ModifiedAt)
	if !ok {
		return bounds{}
	}
	return bounds{id: f.ID, kind: kind}
}

// of encodes f's bounds as Iceberg's single-value serialization: a date is
// its day (4 bytes), a timestamp its microseconds (8 bytes), little endian.
// A file whose modified-at is all NULL, or that holds an infinite stamp
// (which no Iceberg value spells), gets none.
func (b bounds) of(f manifest.File) (lo, hi []byte, ok bool) {
	if b.id == 0 || f.MinModifiedAt == nil || f.MaxModifiedAt == nil {
		return nil, nil, false
	}
	min, err1 := watermark.Parse(b.kind, *f.MinModifiedAt)
	max, err2 := watermark.Parse(b.kind, *f.MaxModifiedAt)
	if err1 != nil || err2 != nil || min.IsInfinite() || max.IsInfinite() {
		return nil, nil, false
	}
	return b.encode(min), b.encode(max), true
}

func (b bounds) encode(v watermark.Value) []byte {
	if b.kind == watermark.Date {
		return binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))
	}
	return binary.LittleEndian.AppendUint64(nil, uint64(v))
}
