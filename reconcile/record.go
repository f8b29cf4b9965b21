package reconcile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// A record is what a comparison keeps of one row, in memory and in the
// spill files:
//
//	flags uint8 | mod int64 | [version int64] | [ordinal uvarint] | hash [16]byte | key
//
// The key is keyBytes of the key columns' values. A version or ordinal of
// zero is not written (flagVersion, flagOrdinal say which are): source
// records have neither, and spilling both sides is most of a reconcile's
// I/O.
const recHeader = 1 + 8 + hashLen

const hashLen = 16

const (
	flagDeleted = 1 << iota
	flagModNull
	// Set in the spill files only: the fields written.
	flagVersion
	flagOrdinal
)

type record struct {
	flags   byte
	mod     int64
	version int64
	ordinal uint64
	hash    [hashLen]byte
	key     []byte
}

func (r *record) deleted() bool { return r.flags&flagDeleted != 0 }
func (r *record) modNull() bool { return r.flags&flagModNull != 0 }

func (r *record) append(dst []byte) []byte {
	flags, n := r.flags&^(flagVersion|flagOrdinal), recHeader+len(r.key)
	if r.version != 0 {
		flags |= flagVersion
		n += 8
	}
	if r.ordinal != 0 {
		flags |= flagOrdinal
		n += uvarintLen(r.ordinal)
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.mod))
	if flags&flagVersion != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.version))
	}
	if flags&flagOrdinal != 0 {
		dst = binary.AppendUvarint(dst, r.ordinal)
	}
	dst = append(dst, r.hash[:]...)
	return append(dst, r.key...)
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// parseRecord reads a record's body (without its length) into r, in
// place: a partition's records are parsed into the slice they are judged
// in. The key aliases b.
func parseRecord(r *record, b []byte) error {
	if len(b) < recHeader {
		return fmt.Errorf("read spilled record: %d bytes", len(b))
	}
	flags := b[0]
	r.flags, r.mod, r.version, r.ordinal = flags&^(flagVersion|flagOrdinal), int64(binary.BigEndian.Uint64(b[1:])), 0, 0
	b = b[9:]
	if flags&flagVersion != 0 {
		if len(b) < 8+hashLen {
			return fmt.Errorf("read spilled record: truncated")
		}
		r.version = int64(binary.BigEndian.Uint64(b))
		b = b[8:]
	}
	if flags&flagOrdinal != 0 {
		o, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("read spilled record: truncated")
		}
		r.ordinal = o
		b = b[n:]
	}
	if len(b) < hashLen {
		return fmt.Errorf("read spilled record: truncated")
	}
	r.hash = [hashLen]byte(b[:hashLen])
	r.key = b[hashLen:]
	return nil
}

// newer reports whether a wins over b by dedupe's rule: the greater
// (modified_at, _hw_version), NULL modified-at lowest, and on a tie the
// later input (dedupe/keys.go orders its records so).
func newer(a, b *record) bool {
	if a.modNull() != b.modNull() {
		return b.modNull()
	}
	if !a.modNull() && a.mod != b.mod {
		return a.mod > b.mod
	}
	if a.version != b.version {
		return a.version > b.version
	}
	return a.ordinal > b.ordinal
}

// tagNull is the tag of a NULL in keyBytes and in the hashed form; any
// other value's tag is its parquet.Kind plus one.
const tagNull = 0

func kindTag(k parquet.Kind) byte { return byte(k) + 1 }

// appendValue appends an exact, self-delimiting form of one Parquet
// value: its tag, then its bits. Two values have the same form exactly
// when a file holds the same value (a NaN's payload and -0 included). It
// takes the value by pointer: the lake's column reader calls it for every
// value it reads, and a copy of each cost a tenth of the reader's time.
func appendValue(dst []byte, v *parquet.Value) []byte {
	if v.IsNull() {
		return append(dst, tagNull)
	}
	k := v.Kind()
	switch k {
	case parquet.Int64:
		return binary.BigEndian.AppendUint64(append(dst, kindTag(k)), uint64(v.Int64()))
	case parquet.ByteArray, parquet.FixedLenByteArray:
		b := v.ByteArray()
		return append(binary.AppendUvarint(append(dst, kindTag(k)), uint64(len(b))), b...)
	case parquet.Int32:
		return binary.BigEndian.AppendUint32(append(dst, kindTag(k)), uint32(v.Int32()))
	case parquet.Boolean:
		if v.Boolean() {
			return append(dst, kindTag(k), 1)
		}
		return append(dst, kindTag(k), 0)
	case parquet.Float:
		return binary.BigEndian.AppendUint32(append(dst, kindTag(k)), math.Float32bits(v.Float()))
	case parquet.Double:
		return binary.BigEndian.AppendUint64(append(dst, kindTag(k)), math.Float64bits(v.Double()))
	default: // Int96
		dst = append(dst, kindTag(k))
		for _, w := range v.Int96() {
			dst = binary.BigEndian.AppendUint32(dst, w)
		}
		return dst
	}
}

var errTruncated = errors.New("decode key: truncated")

// readValue decodes one value of appendValue's form, returning the rest.
// Byte arrays alias b.
func readValue(b []byte) (parquet.Value, []byte, error) {
	if len(b) == 0 {
		return parquet.Value{}, nil, errTruncated
	}
	tag, b := b[0], b[1:]
	if tag == tagNull {
		return parquet.Value{}, b, nil
	}
	if tag > kindTag(parquet.FixedLenByteArray) {
		return parquet.Value{}, nil, fmt.Errorf("decode key: unknown tag %d", tag)
	}
	k := parquet.Kind(tag - 1)
	if k == parquet.ByteArray || k == parquet.FixedLenByteArray {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return parquet.Value{}, nil, errTruncated
		}
		p := b[n : n+int(l) : n+int(l)]
		if k == parquet.FixedLenByteArray {
			return parquet.FixedLenByteArrayValue(p), b[n+int(l):], nil
		}
		return parquet.ByteArrayValue(p), b[n+int(l):], nil
	}
	var size int
	switch k {
	case parquet.Boolean:
		size = 1
	case parquet.Int32, parquet.Float:
		size = 4
	case parquet.Int64, parquet.Double:
		size = 8
	case parquet.Int96:
		size = 12
	}
	if len(b) < size {
		return parquet.Value{}, nil, errTruncated
	}
	var v parquet.Value
	switch k {
	case parquet.Boolean:
		v = parquet.BooleanValue(b[0] == 1)
	case parquet.Int32:
		v = parquet.Int32Value(int32(binary.BigEndian.Uint32(b)))
	case parquet.Int64:
		v = parquet.Int64Value(int64(binary.BigEndian.Uint64(b)))
	case parquet.Int96:
		v = parquet.Int96Value(deprecated.Int96{binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])})
	case parquet.Float:
		v = parquet.FloatValue(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case parquet.Double:
		v = parquet.DoubleValue(math.Float64frombits(binary.BigEndian.Uint64(b)))
	}
	return v, b[size:], nil
}

// decodeKey splits keyBytes into its values.
func decodeKey(key []byte, n int) ([]parquet.Value, error) {
	out := make([]parquet.Value, 0, n)
	for range n {
		v, rest, err := readValue(key)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		key = rest
	}
	if len(key) != 0 {
		return nil, fmt.Errorf("decode key: %d bytes left over", len(key))
	}
	return out, nil
}

// rowShape locates the columns of one file schema in a row: the source
// columns come first, in the mapping's order, then _hw_version and
// _hw_deleted.
type rowShape struct {
	nsrc    int   // source columns
	key     []int // column index of each key column
	mod     int
	version int
	deleted int
	// keysOnly: the hash covers the modified-at only.
	keysOnly bool
	// seeds of the values' hash, drawn once per reconcile (newRowShape):
	// both sides of one comparison hash with the same seeds, and a hash
	// never leaves the process.
	seeds [2]maphash.Seed
}

func newRowShape(nsrc int, key []int, mod int, keysOnly bool) rowShape {
	return rowShape{nsrc: nsrc, key: key, mod: mod, version: nsrc, deleted: nsrc + 1, keysOnly: keysOnly,
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// hash is the hash of a row's hashed form: two 64-bit hashes with seeds
// drawn at random per reconcile, so that a change goes unseen only if
// both collide, for values chosen without knowing the seeds, at a
// fraction of a cryptographic hash's cost.
func (sh *rowShape) hash(form []byte) (h [hashLen]byte) {
	binary.LittleEndian.PutUint64(h[:8], maphash.Bytes(sh.seeds[0], form))
	binary.LittleEndian.PutUint64(h[8:], maphash.Bytes(sh.seeds[1], form))
	return h
}

// fromForm sets rec's key, modified-at and hash from a row's hashed form
// f, in which source column c's value is f[at[c]:end[c]]. It builds the
// key in key's memory and returns it, for the next row.
func (sh *rowShape) fromForm(rec *record, f []byte, at, end []int, key []byte) ([]byte, error) {
	k := key[:0]
	for _, c := range sh.key {
		k = append(k, f[at[c]:end[c]]...)
	}
	rec.key = k
	modForm := f[at[sh.mod]:end[sh.mod]]
	mod, null, err := modOf(modForm)
	if err != nil {
		return k, err
	}
	rec.mod = mod
	if null {
		rec.flags |= flagModNull
	}
	if sh.keysOnly {
		f = modForm
	}
	rec.hash = sh.hash(f)
	return k, nil
}

// hasher turns rows into records; it is reused row after row and is not
// safe for concurrent use.
type hasher struct {
	sh  *rowShape
	pos []int
	buf []byte
}

// positions finds each column's first value in row: an array column has
// one value per element.
func (h *hasher) positions(row parquet.Row, ncols int) {
	if cap(h.pos) < ncols {
		h.pos = make([]int, ncols)
	}
	h.pos = h.pos[:ncols]
	// A row's values come in column order. When the last value's column
	// is the row's length less one, each of columns 0..len-1 has exactly
	// one value, as in every row of a table without arrays.
	if n := len(row); n <= ncols && (n == 0 || int(row[n-1].Column()) == n-1) {
		for i := range h.pos {
			h.pos[i] = -1
			if i < n {
				h.pos[i] = i
			}
		}
		return
	}
	for i := range h.pos {
		h.pos[i] = -1
	}
	prev := -1
	for i, v := range row {
		if c := v.Column(); c != prev && c < ncols {
			h.pos[c] = i
			prev = c
		}
	}
}

func (h *hasher) value(row parquet.Row, col int) parquet.Value {
	if p := h.pos[col]; p >= 0 {
		return row[p]
	}
	return parquet.Value{}
}

// record fills r from row (which holds every column, or with keysOnly at
// least the key, modified-at and hidden columns). The key aliases the
// hasher's buffer until the next call.
func (h *hasher) record(r *record, row parquet.Row, ncols int) {
	h.positions(row, ncols)
	sh := h.sh
	k := h.buf[:0]
	for _, c := range sh.key {
		cv := h.value(row, c)
		k = appendValue(k, &cv)
	}
	keyLen := len(k)
	*r = record{}
	mod := h.value(row, sh.mod)
	switch {
	case mod.IsNull():
		r.flags |= flagModNull
		r.mod = math.MinInt64
	case mod.Kind() == parquet.Int32:
		r.mod = int64(mod.Int32())
	default:
		r.mod = mod.Int64()
	}
	if sh.version < ncols {
		if v := h.value(row, sh.version); !v.IsNull() {
			r.version = v.Int64()
		}
		if d := h.value(row, sh.deleted); !d.IsNull() && d.Boolean() {
			r.flags |= flagDeleted
		}
	}
	// The hashed form: every source value with its column and levels, so
	// that a NULL array, an empty one and one holding a NULL differ.
	start := len(k)
	if sh.keysOnly {
		k = appendValue(k, &mod)
	} else {
		for _, v := range row {
			if v.Column() >= sh.nsrc {
				continue
			}
			k = binary.AppendUvarint(k, uint64(v.Column()))
			k = append(k, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
			k = appendValue(k, &v)
		}
	}
	r.hash = sh.hash(k[start:])
	h.buf = k
	r.key = k[:keyLen]
}

// keyHash is FNV-1a 64 of a key with a seed, so that a partition split
// again spreads its keys anew.
func keyHash(key []byte, seed uint64) uint64 {
	h := uint64(14695981039346656037) ^ seed*0x9e3779b97f4a7c15
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// modOf reads a record's modified-at from the appendValue form of the
// modified-at column's value, as hasher.record takes it from the value.
func modOf(form []byte) (mod int64, null bool, err error) {
	switch {
	case len(form) == 1 && form[0] == tagNull:
		return math.MinInt64, true, nil
	case len(form) == 5 && form[0] == kindTag(parquet.Int32):
		return int64(int32(binary.BigEndian.Uint32(form[1:]))), false, nil
	case len(form) == 9 && form[0] == kindTag(parquet.Int64):
		return int64(binary.BigEndian.Uint64(form[1:])), false, nil
	}
	v, _, err := readValue(form)
	if err != nil {
		return 0, false, fmt.Errorf("read modified-at: %w", err)
	}
	return v.Int64(), false, nil
}
