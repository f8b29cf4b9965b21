package formats

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// RowGroup is one row group of a file encoded apart from the file, so that
// several row groups can be encoded (shredded and compressed) at once on
// different cores. Rows go in with WriteRows and Flush, from one goroutine
// at a time; Commit appends the row group to its file. Commits must be
// serial and in the order the row groups are to appear in the file.
//
// The file's codec compresses the pages of every row group encoding at
// once, so it must be safe for concurrent use.
type RowGroup struct {
	f    *FileWriter
	rg   *parquet.ConcurrentRowGroupWriter
	open []bounds // the BYTE_ARRAY statistics of this row group
}

// BeginRowGroup starts a row group of f. It may be called while other row
// groups of f are being encoded, but not concurrently with f's other
// methods or Commit. A committed row group must not be used again. Its
// BYTE_ARRAY statistics reach the footer, and its page indexes are
// compacted, as those of f's own row groups are (see FileWriter.footer).
func BeginRowGroup(f *FileWriter) *RowGroup {
	var g *RowGroup
	if n := len(f.spare); n > 0 {
		g, f.spare = f.spare[n-1], f.spare[:n-1]
	} else {
		g = &RowGroup{f: f, rg: f.w.BeginRowGroup()}
	}
	g.open = make([]bounds, len(f.open))
	for i := range g.open {
		g.open[i] = bounds{utf8: f.open[i].utf8}
	}
	return g
}

// WriteRows adds rows to the row group.
func (g *RowGroup) WriteRows(rows []parquet.Row) (int, error) {
	n, err := g.rg.WriteRows(rows)
	g.f.observeInto(g.open, rows[:n])
	if err != nil {
		return n, fmt.Errorf("write parquet rows: %w", err)
	}
	return n, nil
}

// Flush encodes and compresses the pages still buffered, so that Commit
// only copies bytes.
func (g *RowGroup) Flush() error {
	if err := g.rg.Flush(); err != nil {
		return fmt.Errorf("flush parquet row group: %w", err)
	}
	return nil
}

// Commit appends the row group to its file, after any rows the file buffered
// through its own WriteRows.
func (g *RowGroup) Commit() error {
	f := g.f
	if err := f.Flush(); err != nil {
		return err
	}
	n, err := g.rg.Commit()
	if err != nil {
		return fmt.Errorf("write parquet row group: %w", err)
	}
	if n > 0 {
		f.groups = append(f.groups, g.open)
	}
	f.baseSize = f.w.Size()
	// Committed, it is empty: its column writers and page buffers serve
	// the file's next row group rather than the collector.
	g.open = nil
	f.spare = append(f.spare, g)
	return nil
}
