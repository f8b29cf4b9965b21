package reconcile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/highwater-dev/highwater/internal/spill"
)

// partitions spill the records of one side to one file per key-hash
// partition. Each file has a small write buffer, so that all of them
// together stay within their share of the budget.
type partitions struct {
	dir    string
	name   string
	seed   uint64
	files  []*os.File
	w      []*bufio.Writer
	bytes  []int64
	counts []int // records of each partition
	rows   int64
	buf    []byte
	bufLen int
}

func newPartitions(dir, name string, n int, seed uint64, bufferBytes int64) (*partitions, error) {
	p := &partitions{dir: dir, name: name, seed: seed, files: make([]*os.File, n), w: make([]*bufio.Writer, n), bytes: make([]int64, n),
		counts: make([]int, n), bufLen: int(max(4<<10, bufferBytes/int64(n)))}
	return p, nil
}

func (p *partitions) of(key []byte) int {
	return int(keyHash(key, p.seed) % uint64(len(p.files)))
}

func (p *partitions) add(r *record) error {
	i := p.of(r.key)
	if p.files[i] == nil {
		f, err := os.CreateTemp(p.dir, fmt.Sprintf("%s-%d-*", p.name, i))
		if err != nil {
			return fmt.Errorf("create a spill file: %w", err)
		}
		p.files[i], p.w[i] = f, bufio.NewWriterSize(f, p.bufLen)
	}
	p.buf = r.append(p.buf[:0])
	if _, err := p.w[i].Write(p.buf); err != nil {
		return fmt.Errorf("write a spill file: %w", err)
	}
	p.bytes[i] += int64(len(p.buf))
	p.counts[i]++
	p.rows++
	return nil
}

// finish flushes every file; the buffers are dropped.
func (p *partitions) finish() error { return spill.FlushAll(p.w, p.files) }

// read returns the records of partition i, all of them in memory: the
// caller checks the partition's size against the budget first. It reuses
// recs and data, which the records alias.
func (p *partitions) read(i int, recs []record, data []byte) ([]record, []byte, error) {
	recs = recs[:0]
	if p.files[i] == nil {
		return recs, data, nil
	}
	data = slices.Grow(data[:0], int(p.bytes[i]))[:p.bytes[i]]
	if _, err := p.files[i].ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("read a spill file: %w", err)
	}
	recs = slices.Grow(recs, p.counts[i])
	for b := data; len(b) > 0; {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, nil, fmt.Errorf("read a spill file: truncated record")
		}
		r, err := parseRecord(b[n : n+int(l)])
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, r)
		b = b[n+int(l):]
	}
	return recs, data, nil
}

// reader streams the records of partition i, for a split.
func (p *partitions) each(i int, fn func(*record) error) error {
	if p.files[i] == nil {
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(p.files[i], 0, p.bytes[i]), 64<<10)
	var body []byte
	for {
		l, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read a spill file: %w", err)
		}
		if cap(body) < int(l) {
			body = make([]byte, l)
		}
		body = body[:l]
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("read a spill file: %w", err)
		}
		r, err := parseRecord(body)
		if err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
}

// drop removes partition i's file.
func (p *partitions) drop(i int) {
	if f := p.files[i]; f != nil {
		f.Close()
		os.Remove(f.Name())
		p.files[i] = nil
	}
}

func (p *partitions) close() {
	for i := range p.files {
		p.drop(i)
	}
}

func newSpillDir(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, "highwater-reconcile-")
	if err != nil {
		return "", fmt.Errorf("create a spill directory: %w", err)
	}
	return filepath.Clean(dir), nil
}
