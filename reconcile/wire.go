package reconcile

import (
	"encoding/binary"
	"fmt"

	"github.com/highwater-dev/highwater/formats"
	"github.com/parquet-go/parquet-go"
)

// wireHasher turns a source row's wire values into the record hasher makes
// of the Parquet row the mapping converts them to, without making that
// row: a column whose Parquet value is its wire bytes unchanged
// (formats.Mapping.RawValue: integers, floats, text, bytea) is hashed from
// those bytes as they are, every other one is converted by the mapping one
// column at a time (formats.Mapping.Value; AppendColumn for a list). Both
// write exactly the bytes that appendValue writes of the mapping's value,
// with the same column and levels, so the lake side, which hashes the
// files' values with hasher, hashes the same form: the mapping stays the
// one home of what a value becomes. It is reused row after row and is not
// safe for concurrent use.
type wireHasher struct {
	sh   *rowShape
	m    *formats.Mapping
	cols []wireCol
	// order is the columns read: all of them, or with keysOnly the key
	// and modified-at columns.
	order []int
	vals  parquet.Row
	form  []byte // the hashed form of the current row
	key   []byte
	// at and end delimit each scalar column's value (appendValue's form)
	// in form.
	at, end []int
}

type wireCol struct {
	raw    bool
	list   bool
	tag    byte
	width  int    // of a raw number; 0 for a byte array of any length
	prefix []byte // the column's index, as hasher writes it
	lenned bool   // appendValue writes the length first
}

func newWireHasher(sh *rowShape, m *formats.Mapping) *wireHasher {
	h := &wireHasher{sh: sh, m: m, cols: make([]wireCol, sh.nsrc), at: make([]int, sh.nsrc), end: make([]int, sh.nsrc)}
	fields := m.Fields()
	for c := range h.cols {
		kind, width, raw := m.RawValue(c)
		h.cols[c] = wireCol{raw: raw, list: fields[c].Repeated, tag: kindTag(kind), width: width, prefix: binary.AppendUvarint(nil, uint64(c)),
			lenned: kind == parquet.ByteArray || kind == parquet.FixedLenByteArray}
	}
	need := make([]bool, sh.nsrc)
	for _, c := range sh.key {
		need[c] = true
	}
	need[sh.mod] = true
	for c := range need {
		if need[c] || !sh.keysOnly {
			h.order = append(h.order, c)
		}
	}
	return h
}

// record fills r from the wire values of one source row (nil is NULL). The
// key aliases the hasher's buffer until the next call.
func (h *wireHasher) record(r *record, values [][]byte) error {
	f := h.form[:0]
	for _, c := range h.order {
		wc, b := &h.cols[c], values[c]
		if wc.raw && (b == nil || wc.width == 0 || len(b) == wc.width) {
			// AppendRow's levels of a scalar: definition 1 when present.
			f = append(f, wc.prefix...)
			if b == nil {
				f = append(f, 0, 0)
				h.at[c] = len(f)
				f = append(f, tagNull)
			} else {
				f = append(f, 0, 1)
				h.at[c] = len(f)
				f = append(f, wc.tag)
				if wc.lenned {
					f = binary.AppendUvarint(f, uint64(len(b)))
				}
				f = append(f, b...)
			}
			h.end[c] = len(f)
			continue
		}
		if !wc.list && b != nil {
			// AppendRow's levels of a present scalar, as above.
			v, err := h.m.Value(c, b)
			if err != nil {
				return fmt.Errorf("convert row: %w", err)
			}
			f = append(f, wc.prefix...)
			f = append(f, 0, 1)
			h.at[c] = len(f)
			f = appendValue(f, &v)
			h.end[c] = len(f)
			continue
		}
		vals, err := h.m.AppendColumn(h.vals[:0], c, b)
		if err != nil {
			return fmt.Errorf("convert row: %w", err)
		}
		h.vals = vals
		for _, v := range vals {
			f = binary.AppendUvarint(f, uint64(v.Column()))
			f = append(f, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
			h.at[c] = len(f)
			f = appendValue(f, &v)
			h.end[c] = len(f)
		}
	}
	h.form = f
	*r = record{}
	var err error
	h.key, err = h.sh.fromForm(r, f, h.at, h.end, h.key)
	return err
}
