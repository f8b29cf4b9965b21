// Package spill holds what the spill files of dedupe and reconcile share:
// one file per partition, written through a small buffer each, then read
// back.
package spill

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// FlushAll flushes each writer that is set, rewinds its file for reading
// and clears the writer, so that its buffer can be freed: ws[i] writes
// files[i].
func FlushAll(ws []*bufio.Writer, files []*os.File) error {
	for i, w := range ws {
		if w == nil {
			continue
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write a spill file: %w", err)
		}
		if _, err := files[i].Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewind a spill file: %w", err)
		}
		ws[i] = nil
	}
	return nil
}
