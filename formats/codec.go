package formats

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/format"
)

// NewCodec returns the page codec named by a compression setting: "zstd"
// (the default, also for ""), "snappy", "gzip" or "none". Share one codec
// between the files of a run: a zstd codec holds its encoder's history.
func NewCodec(name string) (compress.Codec, error) {
	switch name {
	case "", "zstd":
		return NewZstdCodec()
	case "snappy":
		return &snappy.Codec{}, nil
	case "gzip":
		return &gzip.Codec{}, nil
	case "none", "uncompressed":
		return &uncompressed.Codec{}, nil
	}
	return nil, fmt.Errorf("compression %q is not one of zstd, snappy, gzip, none", name)
}

// ZstdCodec compresses pages with one small-window encoder and decodes
// with one low-memory decoder. parquet-go's own zstd codec keeps encoders in
// a pool that every garbage collection empties, and each new encoder
// allocates an 8 MiB history: that churn was half of an export's heap. A
// page is far smaller than the window, so the ratio does not suffer; the
// files are the same.
type ZstdCodec struct {
	mu  sync.Mutex
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// NewZstdCodec returns a codec at zstd's fastest level (about level 1,
// Apache Arrow's default): the export is CPU-bound on the writer's side,
// and the fastest level takes a quarter less CPU for files about 8% larger
// (docs/bench.md).
func NewZstdCodec() (*ZstdCodec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("create zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, fmt.Errorf("create zstd decoder: %w", err)
	}
	return &ZstdCodec{enc: enc, dec: dec}, nil
}

// String names the codec as parquet-go's codecs do.
func (c *ZstdCodec) String() string { return "ZSTD" }

// CompressionCodec is the codec's id in the Parquet footer.
func (c *ZstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

// Encode compresses one page.
func (c *ZstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enc.EncodeAll(src, dst[:0]), nil
}

// Decode decompresses one page.
func (c *ZstdCodec) Decode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dec.DecodeAll(src, dst[:0])
}
