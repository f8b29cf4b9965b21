package dedupe

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec compresses pages with one small-window encoder. parquet-go's
// own codec keeps encoders in a pool that every garbage collection empties,
// and each new encoder allocates an 8 MiB history: under a tight memory
// limit the collector runs often, and that churn alone broke the limit.
// A page is far smaller than the window, so the ratio does not suffer.
type zstdCodec struct {
	mu  sync.Mutex
	enc *zstd.Encoder
	dec *zstd.Decoder
}

func newZstdCodec() (*zstdCodec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, err
	}
	return &zstdCodec{enc: enc, dec: dec}, nil
}

func (c *zstdCodec) String() string                            { return "ZSTD" }
func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enc.EncodeAll(src, dst[:0]), nil
}

func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dec.DecodeAll(src, dst[:0])
}
