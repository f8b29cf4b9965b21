package dedupe

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// compression is the codec of the output: the option, or else the lake's,
// as the footer of its newest committed file names it. The newest file is
// the last export's, so a lake keeps the codec its exports chose
// (--compression of export, compression: in a config), and a dedupe
// without the option never changes it. A lake whose files hold no row
// group names none, and gets the default.
func (r *runner) compression(ctx context.Context, st *manifest.State) (string, error) {
	if r.opts.Compression != "" {
		return r.opts.Compression, nil
	}
	for i := len(st.Files) - 1; i >= 0; i-- {
		f := st.Files[i]
		codec, ok, err := fileCodec(ctx, r.bucket, r.log.Key(f.Key), f.Bytes)
		if err != nil {
			return "", fmt.Errorf("read the compression of %s: %w", f.Key, err)
		}
		if ok {
			r.logger.Debug("keeping the lake's compression", "compression", codec, "file", f.Key)
			return codec, nil
		}
	}
	return "", nil
}

// fileCodec reads the footer of the Parquet object at key, of size bytes,
// and returns the codec of its first column chunk; ok is false when the
// file has none. highwater writes every chunk of a file in one codec.
func fileCodec(ctx context.Context, b objstore.Bucket, key string, size int64) (name string, ok bool, err error) {
	pf, err := parquet.OpenFile(objectAt{ctx, b, key}, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return "", false, err
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			name, err := formats.CompressionName(c.MetaData.Codec)
			return name, err == nil, err
		}
	}
	return "", false, nil
}

// objectAt reads an object by ranges, so that a footer costs two small
// reads rather than a download.
type objectAt struct {
	ctx context.Context
	b   objstore.Bucket
	key string
}

func (o objectAt) ReadAt(p []byte, off int64) (int, error) {
	rc, err := o.b.GetRange(o.ctx, o.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}
