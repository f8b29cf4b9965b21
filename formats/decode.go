package formats

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/parquet-go/parquet-go"
)

// Edge values of dates and timestamps. PostgreSQL's ±infinity has no Parquet
// counterpart; it is written as the last and first instants that Spark,
// Athena and DuckDB all accept, rather than NULL, so that "never" still sorts
// after every real value and a NULL keeps meaning NULL.
const (
	pgEpochDays   = 10957              // 2000-01-01 in days since 1970-01-01
	pgEpochMicros = 946684800000000    // 2000-01-01 in µs since 1970-01-01
	dateMaxDays   = 2932896            // 9999-12-31
	dateMinDays   = -719162            // 0001-01-01
	tsMaxMicros   = 253402300799999999 // 9999-12-31T23:59:59.999999
	tsMinMicros   = -62135596800000000 // 0001-01-01T00:00:00
	microsPerDay  = 86400000000
)

// arena owns the bytes of BYTE_ARRAY values: pgx reuses its buffers after
// each row. A Mapping's arena never reuses a block, only drops it, so a row
// from AppendRow stays valid for as long as the caller holds it, whatever
// it does with it. A Batch's arena keeps its blocks (reuse) and hands them
// out again after reset: the batch's owner says when its values are dead.
type arena struct {
	buf    []byte
	reuse  bool
	blocks [][]byte // with reuse: every block made, in order
	next   int      // with reuse: the first block not handed out since reset
	// loose: a value too large for a block was made on its own since
	// reset, and only the values that point at it keep it.
	loose bool
}

const arenaBlock = 64 << 10

func (a *arena) alloc(n int) []byte {
	if n > arenaBlock/4 {
		a.loose = true
		return make([]byte, n)
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = a.block()
	}
	s := len(a.buf)
	a.buf = a.buf[:s+n]
	return a.buf[s : s+n : s+n]
}

func (a *arena) block() []byte {
	if !a.reuse {
		return make([]byte, 0, arenaBlock)
	}
	if a.next == len(a.blocks) {
		a.blocks = append(a.blocks, make([]byte, 0, arenaBlock))
	}
	a.next++
	return a.blocks[a.next-1][:0]
}

// reset makes every block of a reusing arena free again.
func (a *arena) reset() { a.buf, a.next, a.loose = nil, 0, false }

func (a *arena) copy(b []byte) []byte {
	d := a.alloc(len(b))
	copy(d, b)
	return d
}

// AppendRow converts one source row, given as binary wire values in column
// order (nil is NULL), into a Parquet row appended to dst[:0]. version is
// the _hw_version in microseconds since the Unix epoch.
func (m *Mapping) AppendRow(dst parquet.Row, values [][]byte, version int64, deleted bool) (parquet.Row, error) {
	if len(values) != len(m.cols) {
		return dst, fmt.Errorf("append row: got %d values for %d columns", len(values), len(m.cols))
	}
	row := dst[:0]
	for i := range m.cols {
		var err error
		if row, err = m.AppendColumn(row, i, values[i]); err != nil {
			return dst, err
		}
	}
	n := len(m.cols)
	row = append(row,
		parquet.Int64Value(version).Level(0, 0, n),
		parquet.BooleanValue(deleted).Level(0, 0, n+1))
	return row, nil
}

// appendList writes a one-dimensional array as a 3-level LIST: definition
// level 0 is a NULL array, 1 an empty one, 2 a NULL element, 3 a value.
// row is a parquet.Row, or one column of a Batch.
func appendList(row []parquet.Value, a *arena, c *column, col int, b []byte) ([]parquet.Value, error) {
	if b == nil {
		return append(row, parquet.Value{}.Level(0, 0, col)), nil
	}
	if len(b) < 12 {
		return row, fmt.Errorf("decode column %q: array header is %d bytes", c.name, len(b))
	}
	ndim := int32(binary.BigEndian.Uint32(b))
	if ndim == 0 {
		return append(row, parquet.Value{}.Level(0, 1, col)), nil
	}
	if ndim != 1 {
		return row, fmt.Errorf("decode column %q: a %d-dimensional array cannot be written as a Parquet LIST; "+
			"select the column as text (e.g. %q::text in a source_query) and run with --full-refresh", c.name, ndim, c.name)
	}
	if len(b) < 20 {
		return row, fmt.Errorf("decode column %q: array header is %d bytes", c.name, len(b))
	}
	n := int(int32(binary.BigEndian.Uint32(b[12:])))
	p := 20
	for j := 0; j < n; j++ {
		rep := 1
		if j == 0 {
			rep = 0
		}
		if p+4 > len(b) {
			return row, fmt.Errorf("decode column %q: array element %d is truncated", c.name, j)
		}
		l := int(int32(binary.BigEndian.Uint32(b[p:])))
		p += 4
		if l < 0 {
			row = append(row, parquet.Value{}.Level(rep, 2, col))
			continue
		}
		if p+l > len(b) {
			return row, fmt.Errorf("decode column %q: array element %d is truncated", c.name, j)
		}
		v, err := decode(a, c, b[p:p+l])
		if err != nil {
			return row, err
		}
		p += l
		v.SetRepetitionLevel(rep) // the setters inline, Level does not
		v.SetDefinitionLevel(3)
		v.SetColumnIndex(col)
		row = append(row, v)
	}
	return row, nil
}

func decode(a *arena, c *column, b []byte) (parquet.Value, error) {
	switch c.enc {
	case encText, encBytes:
		return parquet.ByteArrayValue(a.copy(b)), nil
	case encInt16:
		if len(b) != 2 {
			return parquet.Value{}, lenError(c, 2, b)
		}
		return parquet.Int32Value(int32(int16(binary.BigEndian.Uint16(b)))), nil
	case encInt32:
		if len(b) != 4 {
			return parquet.Value{}, lenError(c, 4, b)
		}
		return parquet.Int32Value(int32(binary.BigEndian.Uint32(b))), nil
	case encInt64:
		if len(b) != 8 {
			return parquet.Value{}, lenError(c, 8, b)
		}
		return parquet.Int64Value(int64(binary.BigEndian.Uint64(b))), nil
	case encOID:
		if len(b) != 4 {
			return parquet.Value{}, lenError(c, 4, b)
		}
		return parquet.Int64Value(int64(binary.BigEndian.Uint32(b))), nil
	case encFloat32:
		if len(b) != 4 {
			return parquet.Value{}, lenError(c, 4, b)
		}
		return parquet.FloatValue(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case encFloat64:
		if len(b) != 8 {
			return parquet.Value{}, lenError(c, 8, b)
		}
		return parquet.DoubleValue(math.Float64frombits(binary.BigEndian.Uint64(b))), nil
	case encBool:
		if len(b) != 1 {
			return parquet.Value{}, lenError(c, 1, b)
		}
		return parquet.BooleanValue(b[0] != 0), nil
	case encDecimal32, encDecimal64, encDecimal128:
		return decodeDecimal(a, c, b)
	case encDate:
		if len(b) != 4 {
			return parquet.Value{}, lenError(c, 4, b)
		}
		return parquet.Int32Value(dateDays(int32(binary.BigEndian.Uint32(b)))), nil
	case encTimestamp:
		if len(b) != 8 {
			return parquet.Value{}, lenError(c, 8, b)
		}
		us, ok := timestampMicros(int64(binary.BigEndian.Uint64(b)))
		if !ok {
			return parquet.Value{}, fmt.Errorf("decode column %q: timestamp beyond year 294246 cannot be written as Parquet micros since 1970", c.name)
		}
		return parquet.Int64Value(us), nil
	case encTimeMicros:
		if len(b) != 8 {
			return parquet.Value{}, lenError(c, 8, b)
		}
		return parquet.Int64Value(int64(binary.BigEndian.Uint64(b))), nil
	case encTimeTZMicros:
		if len(b) != 12 {
			return parquet.Value{}, lenError(c, 12, b)
		}
		us := int64(binary.BigEndian.Uint64(b))
		zone := int64(int32(binary.BigEndian.Uint32(b[8:]))) // seconds west of UTC
		utc := ((us+zone*1e6)%microsPerDay + microsPerDay) % microsPerDay
		return parquet.Int64Value(utc), nil
	case encTimeText:
		if len(b) != 8 {
			return parquet.Value{}, lenError(c, 8, b)
		}
		var buf [32]byte
		return parquet.ByteArrayValue(a.copy(appendTime(buf[:0], int64(binary.BigEndian.Uint64(b))))), nil
	case encTimeTZText:
		if len(b) != 12 {
			return parquet.Value{}, lenError(c, 12, b)
		}
		var buf [40]byte
		s := appendTime(buf[:0], int64(binary.BigEndian.Uint64(b)))
		s = appendZone(s, int32(binary.BigEndian.Uint32(b[8:])))
		return parquet.ByteArrayValue(a.copy(s)), nil
	case encIntervalText:
		if len(b) != 16 {
			return parquet.Value{}, lenError(c, 16, b)
		}
		var buf [96]byte
		s := appendISOInterval(buf[:0], int64(binary.BigEndian.Uint64(b)),
			int32(binary.BigEndian.Uint32(b[8:])), int32(binary.BigEndian.Uint32(b[12:])))
		return parquet.ByteArrayValue(a.copy(s)), nil
	case encUUIDText:
		if len(b) != 16 {
			return parquet.Value{}, lenError(c, 16, b)
		}
		d := a.alloc(36)
		formatUUID(d, b)
		return parquet.ByteArrayValue(d), nil
	case encUUIDBytes:
		if len(b) != 16 {
			return parquet.Value{}, lenError(c, 16, b)
		}
		return parquet.FixedLenByteArrayValue(a.copy(b)), nil
	}
	return parquet.Value{}, fmt.Errorf("decode column %q: no decoder", c.name)
}

func lenError(c *column, want int, b []byte) error {
	return fmt.Errorf("decode column %q: want %d bytes, got %d (is the column selected in binary format?)", c.name, want, len(b))
}

// dateDays converts PostgreSQL's days since 2000 to Parquet's days since
// 1970, mapping ±infinity to 9999-12-31 and 0001-01-01.
func dateDays(pg int32) int32 {
	switch pg {
	case math.MaxInt32:
		return dateMaxDays
	case math.MinInt32:
		return dateMinDays
	}
	return pg + pgEpochDays // cannot overflow: PostgreSQL stops at year 5874897
}

// timestampMicros converts PostgreSQL's µs since 2000 to µs since 1970,
// mapping ±infinity to 9999-12-31T23:59:59.999999 and 0001-01-01T00:00:00.
func timestampMicros(pg int64) (int64, bool) {
	switch pg {
	case math.MaxInt64:
		return tsMaxMicros, true
	case math.MinInt64:
		return tsMinMicros, true
	}
	if pg > math.MaxInt64-pgEpochMicros {
		return 0, false
	}
	return pg + pgEpochMicros, true
}

const hexDigits = "0123456789abcdef"

func formatUUID(d, b []byte) {
	j := 0
	for i := 0; i < 16; i++ {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			d[j] = '-'
			j++
		}
		d[j] = hexDigits[b[i]>>4]
		d[j+1] = hexDigits[b[i]&15]
		j += 2
	}
}
