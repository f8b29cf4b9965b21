// Package lakeread reads committed Parquet files of a lake, for dedupe
// and reconcile: a local copy of each, since Parquet needs random access
// and a local copy makes that cheap on every store, and the rows of a
// row group streamed in batches.
package lakeread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Open copies the object at key of b into a file made by create and opens
// that as Parquet, skipping page indexes and bloom filters, which a full
// read does not use. The caller removes the copy with Discard; on an error
// it is removed already.
func Open(ctx context.Context, b objstore.Bucket, key string, create func() (*os.File, error)) (*os.File, *parquet.File, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("download %s: %w", key, err)
	}
	defer rc.Close()
	local, err := create()
	if err != nil {
		return nil, nil, err
	}
	n, err := io.Copy(local, rc)
	if err != nil {
		Discard(local)
		return nil, nil, fmt.Errorf("download %s: %w", key, err)
	}
	pf, err := parquet.OpenFile(local, n, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		Discard(local)
		return nil, nil, fmt.Errorf("open %s: %w", key, err)
	}
	return local, pf, nil
}

// Discard closes and removes a local copy.
func Discard(local *os.File) {
	local.Close()
	os.Remove(local.Name())
}

// EachRow calls fn for every row of rg, in file order, until fn fails or
// ctx is done. The row is valid only during the call. Several row groups
// of a file may be read at once.
func EachRow(ctx context.Context, rg parquet.RowGroup, fn func(parquet.Row) error) error {
	buf := make([]parquet.Row, 128)
	rows := rg.Rows()
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
