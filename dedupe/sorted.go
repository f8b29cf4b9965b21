package dedupe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// A bucket's files, written by the last dedupe, are already sorted by key
// and hold one row per key: they are runs. The merge reads them as such,
// next to the sorted runs of the new rows, instead of spilling and sorting
// them again: an incremental dedupe of a bucket then spills and sorts only
// its new rows.

// recSource is a sorted run of records that the merge reads.
type recSource interface {
	// next returns the next record, valid until the following call; io.EOF
	// at the end.
	next() ([]byte, error)
}

// sortedFile is a bucket file read as a run. It checks what the merge
// relies on, the order of its records and their bucket, since a file out
// of order would otherwise give a wrong result without an error.
type sortedFile struct {
	ctx    context.Context
	p      *partitioner
	o      *opened
	enc    encoder
	group  int
	rows   parquet.Rows
	buf    []parquet.Row
	n, at  int    // rows in buf, the next one
	base   uint64 // the file's position in the committed set, shifted
	ord    uint64 // the ordinal of the next row
	rec    []byte
	prev   []byte // the previous record's sort key
	read   int64
	widest int
}

func (p *partitioner) newSortedFile(ctx context.Context, o *opened) *sortedFile {
	p.mu.Lock()
	sh := p.sh
	p.mu.Unlock()
	return &sortedFile{ctx: ctx, p: p, o: o, enc: encoder{sh: sh}, base: uint64(p.w.order[o.f.Key]) << 36}
}

func (s *sortedFile) next() ([]byte, error) {
	for s.at >= s.n {
		if err := s.fill(); err != nil {
			return nil, err
		}
	}
	row := s.buf[s.at]
	s.at++
	var h uint64
	s.rec, h = s.enc.encode(s.rec[:0], row, s.base|s.ord)
	s.ord++
	s.read++
	s.widest = max(s.widest, len(s.rec))
	if b := s.p.w.layout.bucketOf(h); b != s.o.want {
		return nil, fmt.Errorf("read %s: a row of bucket %d is in a file of bucket %d: the layout is broken", s.o.f.Key, b, s.o.want)
	}
	k := recSort(s.rec)
	if s.prev != nil && bytes.Compare(k, s.prev) <= 0 {
		return nil, fmt.Errorf("read %s: its rows are not in key order, as a bucket file's must be: the layout is broken", s.o.f.Key)
	}
	s.prev = append(s.prev[:0], k...)
	return s.rec, nil
}

// fill reads the next rows, going on to the next row group at the end of
// one.
func (s *sortedFile) fill() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.rows == nil {
		groups := s.o.in.pf.RowGroups()
		if s.group >= len(groups) {
			return io.EOF
		}
		s.rows = groups[s.group].Rows()
		s.group++
		if s.buf == nil {
			s.buf = make([]parquet.Row, 128)
		}
	}
	n, err := s.rows.ReadRows(s.buf)
	s.n, s.at = n, 0
	if errors.Is(err, io.EOF) {
		err = s.rows.Close()
		s.rows = nil
		if err != nil {
			return fmt.Errorf("read %s: %w", s.o.f.Key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", s.o.f.Key, err)
	}
	return nil
}

// close ends the reading and removes the local copy, and counts the rows
// read into the stats.
func (s *sortedFile) close() {
	if s.rows != nil {
		s.rows.Close()
		s.rows = nil
	}
	s.o.in.close()
	p := s.p
	p.mu.Lock()
	p.stats.inputRows += s.read
	p.stats.widest = max(p.stats.widest, int64(s.widest))
	p.mu.Unlock()
	p.r.opts.Progress.Add(s.read)
	s.read = 0
}

// openBucketFiles opens the files of bucket b as sorted runs.
func (p *partitioner) openBucketFiles(ctx context.Context, b int) ([]*sortedFile, error) {
	var out []*sortedFile
	for _, f := range p.w.bucketed[b] {
		in, err := p.open(ctx, f)
		if err != nil {
			for _, s := range out {
				s.close()
			}
			return nil, err
		}
		out = append(out, p.newSortedFile(ctx, &opened{job: job{f, b}, in: in}))
	}
	return out, nil
}
