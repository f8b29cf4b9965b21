package dedupe

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// leaf is one column that a dedupe reads values of.
type leaf struct {
	name    string
	col     int
	kind    parquet.Kind
	decimal bool // a DECIMAL: a FIXED_LEN_BYTE_ARRAY compares as signed
}

// shape locates, in one file schema, the columns a dedupe orders by.
type shape struct {
	schema  *parquet.Schema
	ncols   int
	key     []leaf
	mod     leaf
	version int
	deleted int
}

func newShape(schema *parquet.Schema, id manifest.Identity) (*shape, error) {
	s := &shape{schema: schema, ncols: len(schema.Columns())}
	find := func(name string) (leaf, error) {
		lc, ok := schema.Lookup(name)
		if !ok {
			return leaf{}, fmt.Errorf("find column %q: the files have no such column", name)
		}
		if lc.MaxRepetitionLevel > 0 {
			return leaf{}, fmt.Errorf("find column %q: an array cannot order versions", name)
		}
		t := lc.Node.Type()
		isDecimal := false
		if lt := t.LogicalType(); lt != nil {
			_, isDecimal = lt.Value.(*format.DecimalType)
		}
		return leaf{name: name, col: lc.ColumnIndex, kind: t.Kind(), decimal: isDecimal}, nil
	}
	for _, k := range id.PrimaryKey {
		l, err := find(k)
		if err != nil {
			return nil, err
		}
		s.key = append(s.key, l)
	}
	var err error
	if s.mod, err = find(id.ModifiedAt); err != nil {
		return nil, err
	}
	if s.mod.kind != parquet.Int64 && s.mod.kind != parquet.Int32 {
		return nil, fmt.Errorf("find column %q: modified-at is stored as %s, not as a timestamp or date", id.ModifiedAt, s.mod.kind)
	}
	v, err := find(formats.ColVersion)
	if err != nil {
		return nil, err
	}
	d, err := find(formats.ColDeleted)
	if err != nil {
		return nil, err
	}
	s.version, s.deleted = v.col, d.col
	return s, nil
}

// Record layout, in memory and in spill files:
//
//	sortLen uint16 | keyLen uint16 | rowLen uint32 | flags uint8 | mod int64
//	sort key (sortLen bytes; its first keyLen bytes are the primary key)
//	row (rowLen bytes)
//
// The sort key is order-preserving: bytes.Compare on it orders records by
// primary key ascending, then by (modified_at, _hw_version, input order)
// descending, so the first record of each key is its winner.
const headerLen = 17

const (
	flagDeleted = 1 << iota
	flagModNull
)

func recSort(rec []byte) []byte {
	n := int(binary.BigEndian.Uint16(rec))
	return rec[headerLen : headerLen+n]
}

func recKey(rec []byte) []byte {
	n := int(binary.BigEndian.Uint16(rec[2:]))
	return rec[headerLen : headerLen+n]
}

func recRow(rec []byte) []byte {
	n := int(binary.BigEndian.Uint16(rec))
	return rec[headerLen+n:]
}

func recLen(header []byte) int {
	return headerLen + int(binary.BigEndian.Uint16(header)) + int(binary.BigEndian.Uint32(header[4:]))
}

func recFlags(rec []byte) byte { return rec[8] }

func recMod(rec []byte) int64 { return int64(binary.BigEndian.Uint64(rec[9:])) }

// encoder turns parquet rows into records. It is reused row after row.
type encoder struct {
	sh  *shape
	pos []int // index in the row of each column's first value
	key []byte
	row []byte
}

// columnPositions fills pos; a flat row has one value per column, but an
// array column has one per element.
func (e *encoder) columnPositions(row parquet.Row) {
	if cap(e.pos) < e.sh.ncols {
		e.pos = make([]int, e.sh.ncols)
	}
	e.pos = e.pos[:e.sh.ncols]
	prev := -1
	for i, v := range row {
		if c := v.Column(); c != prev {
			e.pos[c] = i
			prev = c
		}
	}
}

// encode appends the record of row to dst. ordinal breaks exact ties in
// favour of the later input. It also returns the record's key hash.
func (e *encoder) encode(dst []byte, row parquet.Row, ordinal uint64) (out []byte, hash uint64) {
	e.columnPositions(row)
	k := e.key[:0]
	for _, l := range e.sh.key {
		k = appendOrdered(k, row[e.pos[l.col]], l)
	}
	keyLen := len(k)
	modV := row[e.pos[e.sh.mod.col]]
	var flags byte
	var mod int64
	if modV.IsNull() {
		flags |= flagModNull
		mod = math.MinInt64
	} else if e.sh.mod.kind == parquet.Int32 {
		mod = int64(modV.Int32())
	} else {
		mod = modV.Int64()
	}
	if row[e.pos[e.sh.deleted]].Boolean() {
		flags |= flagDeleted
	}
	// Descending parts: the complement of an ascending encoding.
	start := len(k)
	if flags&flagModNull != 0 {
		k = append(k, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	} else {
		k = append(k, 1)
		k = binary.BigEndian.AppendUint64(k, uint64(mod)^(1<<63))
	}
	k = binary.BigEndian.AppendUint64(k, uint64(row[e.pos[e.sh.version]].Int64())^(1<<63))
	k = binary.BigEndian.AppendUint64(k, ordinal)
	for i := start; i < len(k); i++ {
		k[i] = ^k[i]
	}
	e.key = k
	e.row = encodeRow(e.row[:0], row)

	dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
	dst = binary.BigEndian.AppendUint16(dst, uint16(keyLen))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.row)))
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(mod))
	dst = append(dst, k...)
	dst = append(dst, e.row...)
	return dst, fnv1a(k[:keyLen])
}

// fnv1a is FNV-1a 64: the bucket hash is part of the recorded layout, so
// it must never change; FNV is fixed by its specification.
func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// appendOrdered appends an order-preserving encoding of v: NULL first,
// integers and floats by value, byte arrays by bytes (escaped so that a
// prefix sorts first and the next key column cannot bleed into it).
func appendOrdered(dst []byte, v parquet.Value, l leaf) []byte {
	if v.IsNull() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	switch l.kind {
	case parquet.Boolean:
		if v.Boolean() {
			return append(dst, 1)
		}
		return append(dst, 0)
	case parquet.Int32:
		return binary.BigEndian.AppendUint32(dst, uint32(v.Int32())^(1<<31))
	case parquet.Int64:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int64())^(1<<63))
	case parquet.Float:
		return binary.BigEndian.AppendUint32(dst, uint32(orderedFloatBits(uint64(math.Float32bits(v.Float())), 32)))
	case parquet.Double:
		return binary.BigEndian.AppendUint64(dst, orderedFloatBits(math.Float64bits(v.Double()), 64))
	case parquet.FixedLenByteArray:
		b := v.ByteArray()
		if l.decimal && len(b) > 0 {
			// Two's complement, big-endian: flipping the sign bit orders
			// values of one width.
			dst = append(dst, b[0]^0x80)
			return append(dst, b[1:]...)
		}
		return append(dst, b...)
	default: // BYTE_ARRAY, INT96
		for _, c := range v.ByteArray() {
			if c == 0 {
				dst = append(dst, 0, 0xff)
			} else {
				dst = append(dst, c)
			}
		}
		return append(dst, 0, 1)
	}
}

func orderedFloatBits(bits uint64, size uint) uint64 {
	sign := uint64(1) << (size - 1)
	if bits&sign != 0 {
		return ^bits & (sign<<1 - 1)
	}
	return bits | sign
}

// Value tags of the row encoding.
const (
	tagNull = iota
	tagFalse
	tagTrue
	tagInt32
	tagInt64
	tagInt96
	tagFloat
	tagDouble
	tagBytes
	tagFixed
)

// Row forms: a flat row (value i is column i, no repetition, definition
// level under 16, as every row of a table without arrays) packs each
// value's definition level into its tag byte; any other row spells out
// each value's column and levels. Records cross the disk twice, so the
// three bytes saved per value count.
const (
	rowGeneral = iota
	rowFlat
)

// encodeRow writes a row compactly: per value a tag and the payload, and
// for a row that is not flat its column and levels.
func encodeRow(dst []byte, row parquet.Row) []byte {
	flat := true
	for i, v := range row {
		if v.Column() != i || v.RepetitionLevel() != 0 || v.DefinitionLevel() >= 16 {
			flat = false
			break
		}
	}
	if !flat {
		return encodeValues(append(dst, rowGeneral), row, false)
	}
	return encodeValues(append(dst, rowFlat), row, true)
}

func encodeValues(dst []byte, row parquet.Row, flat bool) []byte {
	for _, v := range row {
		var lv byte // the definition level, in the tag's high bits when flat
		if flat {
			lv = byte(v.DefinitionLevel()) << 4
		} else {
			dst = binary.AppendUvarint(dst, uint64(v.Column()))
			dst = append(dst, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
		}
		if v.IsNull() {
			//lint:ignore SA4016 tags are values in the low bits, not flags; null's is 0
			dst = append(dst, lv|tagNull)
			continue
		}
		switch v.Kind() {
		case parquet.Boolean:
			if v.Boolean() {
				dst = append(dst, lv|tagTrue)
			} else {
				dst = append(dst, lv|tagFalse)
			}
		case parquet.Int32:
			dst = binary.LittleEndian.AppendUint32(append(dst, lv|tagInt32), uint32(v.Int32()))
		case parquet.Int64:
			dst = binary.LittleEndian.AppendUint64(append(dst, lv|tagInt64), uint64(v.Int64()))
		case parquet.Float:
			dst = binary.LittleEndian.AppendUint32(append(dst, lv|tagFloat), math.Float32bits(v.Float()))
		case parquet.Double:
			dst = binary.LittleEndian.AppendUint64(append(dst, lv|tagDouble), math.Float64bits(v.Double()))
		case parquet.Int96:
			x := v.Int96()
			dst = append(dst, lv|tagInt96)
			dst = binary.LittleEndian.AppendUint32(dst, x[0])
			dst = binary.LittleEndian.AppendUint32(dst, x[1])
			dst = binary.LittleEndian.AppendUint32(dst, x[2])
		case parquet.FixedLenByteArray:
			b := v.ByteArray()
			dst = binary.AppendUvarint(append(dst, lv|tagFixed), uint64(len(b)))
			dst = append(dst, b...)
		default:
			b := v.ByteArray()
			dst = binary.AppendUvarint(append(dst, lv|tagBytes), uint64(len(b)))
			dst = append(dst, b...)
		}
	}
	return dst
}

// decodeRow appends the values of an encoded row to dst. Byte arrays refer
// to b, which must outlive the row.
func decodeRow(dst parquet.Row, b []byte) (parquet.Row, error) {
	if len(b) == 0 {
		return dst, fmt.Errorf("decode spilled row: empty")
	}
	flat, first := b[0] == rowFlat, len(dst)
	b = b[1:]
	for len(b) > 0 {
		var col uint64
		var rep, def int
		var tag byte
		if flat {
			col, def, tag = uint64(len(dst)-first), int(b[0]>>4), b[0]&0x0f
			b = b[1:]
		} else {
			c, n := binary.Uvarint(b)
			if n <= 0 || len(b) < n+3 {
				return dst, fmt.Errorf("decode spilled row: truncated value")
			}
			col, rep, def, tag = c, int(b[n]), int(b[n+1]), b[n+2]
			b = b[n+3:]
		}
		var v parquet.Value
		switch tag {
		case tagNull:
		case tagFalse:
			v = parquet.BooleanValue(false)
		case tagTrue:
			v = parquet.BooleanValue(true)
		case tagInt32:
			v, b = parquet.Int32Value(int32(binary.LittleEndian.Uint32(b))), b[4:]
		case tagInt64:
			v, b = parquet.Int64Value(int64(binary.LittleEndian.Uint64(b))), b[8:]
		case tagFloat:
			v, b = parquet.FloatValue(math.Float32frombits(binary.LittleEndian.Uint32(b))), b[4:]
		case tagDouble:
			v, b = parquet.DoubleValue(math.Float64frombits(binary.LittleEndian.Uint64(b))), b[8:]
		case tagInt96:
			x := deprecated.Int96{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])}
			v, b = parquet.Int96Value(x), b[12:]
		case tagBytes, tagFixed:
			l, m := binary.Uvarint(b)
			if m <= 0 || uint64(len(b)-m) < l {
				return dst, fmt.Errorf("decode spilled row: truncated bytes")
			}
			p := b[m : m+int(l) : m+int(l)]
			if tag == tagBytes {
				v = parquet.ByteArrayValue(p)
			} else {
				v = parquet.FixedLenByteArrayValue(p)
			}
			b = b[m+int(l):]
		default:
			return dst, fmt.Errorf("decode spilled row: unknown tag %d", tag)
		}
		dst = append(dst, v.Level(rep, def, int(col)))
	}
	return dst, nil
}
