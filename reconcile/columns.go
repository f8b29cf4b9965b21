package reconcile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
)

// columnRows is how many rows of a row group columnHasher turns into
// records at a time.
const columnRows = 1024

// columnBatchBytes bounds the values of a batch of rows, from the row
// group's mean row width: the batch's values stay in memory until it is
// hashed, and a batch of columnRows rows of wide values would hold far
// more than the memory limit.
const columnBatchBytes = 4 << 20

// columnHasher turns the rows of a row group of flat columns into the
// records hasher makes of them, reading the group column by column
// instead of assembling parquet.Rows: the values of a batch of rows are
// read one column after the other, and then each row's hashed form is
// written from them, in the order of the columns, with the column and
// levels, exactly as hasher writes it. It reads only the columns the
// comparison needs (with keysOnly the key, modified-at and hidden
// columns). It is reused group after group and is not safe for concurrent
// use.
type columnHasher struct {
	sh *rowShape
	// cols are the file columns read, ascending.
	cols   []int
	prefix [][]byte // of each file column, its index as hasher writes it
	// vals holds a batch's values of each column read.
	vals      [][]parquet.Value
	at, end   []int // each source column's value in form
	form, key []byte
}

func newColumnHasher(sh *rowShape) *columnHasher {
	h := &columnHasher{sh: sh, at: make([]int, sh.nsrc+2), end: make([]int, sh.nsrc+2)}
	for c := range sh.nsrc + 2 {
		if sh.keysOnly && c < sh.nsrc && c != sh.mod && !slices.Contains(sh.key, c) {
			continue
		}
		h.cols = append(h.cols, c)
		h.vals = append(h.vals, make([]parquet.Value, columnRows))
	}
	h.prefix = make([][]byte, sh.nsrc+2)
	for c := range h.prefix {
		h.prefix[c] = binary.AppendUvarint(nil, uint64(c))
	}
	return h
}

// group emits a record of every row of rg, in file order, until emit
// fails or ctx is done; size is rg's uncompressed size in bytes. The
// record's key is valid only during the call.
func (h *columnHasher) group(ctx context.Context, rg parquet.RowGroup, size int64, emit func(*record) error) error {
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
	batch := int64(columnRows)
	if rows := rg.NumRows(); rows > 0 && size > 0 {
		batch = max(1, min(batch, columnBatchBytes*rows/size))
	}
	for left := rg.NumRows(); left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(left, batch))
		left -= int64(n)
		// The values' byte arrays stay valid until the column's next read.
		for ci, c := range h.cols {
			if err := readers[ci].read(h.vals[ci][:n]); err != nil {
				return fmt.Errorf("read column %d: %w", c, err)
			}
		}
		for i := range n {
			rec = record{}
			f := h.form[:0]
			for ci, c := range h.cols {
				v := &h.vals[ci][i]
				switch c {
				case sh.version:
					if !v.IsNull() {
						rec.version = v.Int64()
					}
					continue
				case sh.deleted:
					if !v.IsNull() && v.Boolean() {
						rec.flags |= flagDeleted
					}
					continue
				}
				f = append(f, h.prefix[c]...)
				f = append(f, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
				h.at[c] = len(f)
				f = appendValue(f, v)
				h.end[c] = len(f)
			}
			h.form = f
			var err error
			if h.key, err = sh.fromForm(&rec, f, h.at, h.end, h.key); err != nil {
				return err
			}
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
