package dedupe

import (
	"context"
	"os"

	"github.com/highwater-dev/highwater/internal/lakeread"
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
	local, pf, err := lakeread.Open(ctx, b, key, func() (*os.File, error) { return dir.create("input") })
	if err != nil {
		return nil, err
	}
	return &inputFile{local: local, pf: pf}, nil
}

// close removes the local copy.
func (in *inputFile) close() { lakeread.Discard(in.local) }

// eachRowOf calls fn for every row of one row group, in file order. The
// row is valid only during the call. Several row groups of a file may be
// read at once.
func (in *inputFile) eachRowOf(ctx context.Context, group int, fn func(row parquet.Row) error) error {
	return lakeread.EachRow(ctx, in.pf.RowGroups()[group], fn)
}
