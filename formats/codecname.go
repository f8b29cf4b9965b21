package formats

import (
	"fmt"

	"github.com/parquet-go/parquet-go/format"
)

// CompressionName is the inverse of NewCodec: the compression setting that
// writes pages in codec c, as a file's footer names it. A codec highwater
// does not write (LZ4, Brotli, ...) is an error.
func CompressionName(c format.CompressionCodec) (string, error) {
	switch c {
	case format.Zstd:
		return "zstd", nil
	case format.Snappy:
		return "snappy", nil
	case format.Gzip:
		return "gzip", nil
	case format.Uncompressed:
		return "none", nil
	}
	return "", fmt.Errorf("compression codec %s is not one of zstd, snappy, gzip, none", c)
}
