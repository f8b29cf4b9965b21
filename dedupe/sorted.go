package dedupe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/parquet-go/parquet-go"
)

// A bucket's files, written by the last dedupe, are already sorted by key
// and hold one row per key: together, in committed order (the order the
// dedupe wrote them), they are one run. The merge reads them as such, next
// to the sorted runs of the new rows, instead of spilling and sorting them
// again: an incremental dedupe of a bucket then spills and sorts only its
// new rows. They are read one after the other, so that a bucket being
// merged holds one input row group's pages at a time, as a worker of the
// partition does.

// recSource is a sorted run of records that the merge reads.
type recSource interface {
	// next returns the next record, valid until the following call; io.EOF
	// at the end.
	next() ([]byte, error)
}

// sortedFile is the files of a bucket read as a run. It checks what the
// merge relies on, the order of the records and their bucket, since a
// file out of order would otherwise give a wrong result without an error.
type sortedFile struct {
	ctx    context.Context
	p      *partitioner
	b      int
	files  []manifest.File // not opened yet
	o      *opened         // nil between files
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

// bucketRun reads the files of bucket b as one run.
func (p *partitioner) bucketRun(ctx context.Context, b int) *sortedFile {
	p.mu.Lock()
	sh := p.sh
	p.mu.Unlock()
	return &sortedFile{ctx: ctx, p: p, b: b, files: p.w.bucketed[b], enc: encoder{sh: sh}}
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
// one, and to the next file at the end of the last.
func (s *sortedFile) fill() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.o == nil {
		if len(s.files) == 0 {
			return io.EOF
		}
		f := s.files[0]
		s.files = s.files[1:]
		in, err := s.p.open(s.ctx, f)
		if err != nil {
			return err
		}
		s.o, s.group = &opened{job: job{f, s.b}, in: in}, 0
		// The row's position in the committed set breaks the last ties.
		s.base, s.ord = uint64(s.p.w.order[f.Key])<<36, 0
	}
	if s.rows == nil {
		groups := s.o.in.pf.RowGroups()
		if s.group >= len(groups) {
			s.o.in.close()
			s.o = nil
			return nil
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
	if s.o != nil {
		s.o.in.close()
		s.o = nil
	}
	p := s.p
	p.mu.Lock()
	p.stats.inputRows += s.read
	p.stats.widest = max(p.stats.widest, int64(s.widest))
	p.mu.Unlock()
	p.r.opts.Progress.Add(s.read)
	s.read = 0
}
