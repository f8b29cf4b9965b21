package dedupe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/parquet-go/parquet-go"
)

// inputFile is one committed file opened for reading from a local copy:
// Parquet needs random access, and a local copy makes that cheap on every
// store.
type inputFile struct {
	local *os.File
	pf    *parquet.File
}

func openInput(ctx context.Context, b objstore.Bucket, key string, dir *spillDir) (*inputFile, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read input %s: %w", key, err)
	}
	defer rc.Close()
	f, err := dir.create("input")
	if err != nil {
		return nil, err
	}
	in := &inputFile{local: f}
	n, err := io.Copy(f, rc)
	if err != nil {
		in.close()
		return nil, fmt.Errorf("download input %s: %w", key, err)
	}
	in.pf, err = parquet.OpenFile(f, n, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		in.close()
		return nil, fmt.Errorf("open input %s: %w", key, err)
	}
	return in, nil
}

// close removes the local copy.
func (in *inputFile) close() {
	in.local.Close()
	os.Remove(in.local.Name())
}

// eachRowOf calls fn for every row of one row group, in file order. The
// row is valid only during the call. Several row groups of a file may be
// read at once.
func (in *inputFile) eachRowOf(ctx context.Context, group int, fn func(row parquet.Row) error) error {
	buf := make([]parquet.Row, 128)
	rows := in.pf.RowGroups()[group].Rows()
	for {
		if err := ctx.Err(); err != nil {
			rows.Close()
			return err
		}
		n, err := rows.ReadRows(buf)
		for _, row := range buf[:n] {
			if ferr := fn(row); ferr != nil {
				rows.Close()
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rows.Close()
			return fmt.Errorf("read rows: %w", err)
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	return nil
}
