package reconcile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"
)

// columnRows is how many rows of a row group columnHasher turns into
// records at a time.
const columnRows = 1024

// columnHasher turns the rows of a row group of flat columns into the
// records hasher makes of them, reading the group column by column
// instead of assembling parquet.Rows: each column's values of a batch of
// rows are appended to the rows' hashed forms in turn, in the order of the
// columns, with the column and levels, exactly as hasher writes them. It
// reads only the columns the comparison needs (with keysOnly the key,
// modified-at and hidden columns). It is reused group after group and is
// not safe for concurrent use.
type columnHasher struct {
	sh *rowShape
	// cols are the file columns read, ascending.
	cols   []int
	prefix [][]byte // of each file column, its index as hasher writes it
	// keyPos is the position in sh.key of each column read, or -1.
	keyPos []int
	forms  [][]byte
	// keyAt and keyEnd delimit, for each key column and row of the batch,
	// its value in the row's form.
	keyAt, keyEnd [][]int
	mods          []parquet.Value
	versions      []int64
	deleted       []bool
	vals          []parquet.Value
	key, modForm  []byte
}

func newColumnHasher(sh *rowShape) *columnHasher {
	h := &columnHasher{sh: sh, forms: make([][]byte, columnRows), mods: make([]parquet.Value, columnRows),
		versions: make([]int64, columnRows), deleted: make([]bool, columnRows), vals: make([]parquet.Value, columnRows)}
	for c := range sh.nsrc + 2 {
		if sh.keysOnly && c < sh.nsrc && c != sh.mod && !containsInt(sh.key, c) {
			continue
		}
		h.cols = append(h.cols, c)
	}
	h.keyPos = make([]int, len(h.cols))
	for i, c := range h.cols {
		h.keyPos[i] = -1
		for j, k := range sh.key {
			if k == c {
				h.keyPos[i] = j
			}
		}
	}
	h.prefix = make([][]byte, sh.nsrc+2)
	for c := range h.prefix {
		h.prefix[c] = binary.AppendUvarint(nil, uint64(c))
	}
	h.keyAt, h.keyEnd = make([][]int, len(sh.key)), make([][]int, len(sh.key))
	for j := range sh.key {
		h.keyAt[j], h.keyEnd[j] = make([]int, columnRows), make([]int, columnRows)
	}
	return h
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// group emits a record of every row of rg, in file order, until emit
// fails or ctx is done. The record's key is valid only during the call.
func (h *columnHasher) group(ctx context.Context, rg parquet.RowGroup, emit func(*record) error) error {
	chunks := rg.ColumnChunks()
	readers := make([]pageValues, len(h.cols))
	for i, c := range h.cols {
		readers[i].pages = chunks[c].Pages()
	}
	defer func() {
		for i := range readers {
			readers[i].close()
		}
	}()
	sh := h.sh
	var rec record
	for left := rg.NumRows(); left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(left, columnRows))
		left -= int64(n)
		for i := range h.forms[:n] {
			h.forms[i] = h.forms[i][:0]
		}
		for ci, c := range h.cols {
			vals := h.vals[:n]
			if err := readers[ci].read(vals); err != nil {
				return fmt.Errorf("read column %d: %w", c, err)
			}
			switch {
			case c == sh.version:
				for i, v := range vals {
					h.versions[i] = 0
					if !v.IsNull() {
						h.versions[i] = v.Int64()
					}
				}
				continue
			case c == sh.deleted:
				for i, v := range vals {
					h.deleted[i] = !v.IsNull() && v.Boolean()
				}
				continue
			}
			if c == sh.mod {
				copy(h.mods, vals)
			}
			j := h.keyPos[ci]
			for i, v := range vals {
				f := append(h.forms[i], h.prefix[c]...)
				f = append(f, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
				if j >= 0 {
					h.keyAt[j][i] = len(f)
				}
				f = appendValue(f, v)
				if j >= 0 {
					h.keyEnd[j][i] = len(f)
				}
				h.forms[i] = f
			}
		}
		for i := range n {
			f := h.forms[i]
			k := h.key[:0]
			for j := range sh.key {
				k = append(k, f[h.keyAt[j][i]:h.keyEnd[j][i]]...)
			}
			h.key = k
			rec = record{key: k, version: h.versions[i]}
			mod := h.mods[i]
			switch {
			case mod.IsNull():
				rec.flags |= flagModNull
				rec.mod = math.MinInt64
			case mod.Kind() == parquet.Int32:
				rec.mod = int64(mod.Int32())
			default:
				rec.mod = mod.Int64()
			}
			if h.deleted[i] {
				rec.flags |= flagDeleted
			}
			if sh.keysOnly {
				h.modForm = appendValue(h.modForm[:0], mod)
				f = h.modForm
			}
			binary.LittleEndian.PutUint64(rec.hash[:8], maphash.Bytes(sh.seeds[0], f))
			binary.LittleEndian.PutUint64(rec.hash[8:], maphash.Bytes(sh.seeds[1], f))
			if err := emit(&rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// pageValues reads the values of one flat column chunk, page after page.
type pageValues struct {
	pages parquet.Pages
	page  parquet.Page
	vals  parquet.ValueReader
	// done are the pages read to their end by the last call to read,
	// whose byte arrays the values it gave still point into.
	done []parquet.Page
}

// read fills buf with the next len(buf) values. Their byte arrays point
// into the pages, which stay valid until the next call.
func (p *pageValues) read(buf []parquet.Value) error {
	p.release()
	for n := 0; n < len(buf); {
		if p.vals == nil {
			pg, err := p.pages.ReadPage()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return io.ErrUnexpectedEOF
				}
				return err
			}
			p.page, p.vals = pg, pg.Values()
		}
		m, err := p.vals.ReadValues(buf[n:])
		n += m
		switch {
		case errors.Is(err, io.EOF):
			p.done = append(p.done, p.page)
			p.page, p.vals = nil, nil
		case err != nil:
			return err
		}
	}
	return nil
}

func (p *pageValues) release() {
	for _, pg := range p.done {
		parquet.Release(pg)
	}
	p.done = p.done[:0]
}

func (p *pageValues) close() {
	p.release()
	if p.page != nil {
		parquet.Release(p.page)
		p.page = nil
	}
	if p.pages != nil {
		p.pages.Close()
	}
}
