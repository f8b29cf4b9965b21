package dedupe

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
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
		zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20))
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

// codecNode makes every leaf of a schema compress with one codec. A schema
// read from a file names the file's codec on each column, and the writer
// prefers it over its default: the outputs would be compressed by
// parquet-go's pooled zstd codec, whose encoders the collector drops and
// whose every new encoder allocates an 8 MiB history.
type codecNode struct {
	parquet.Node
	codec compress.Codec
}

type codecField struct {
	parquet.Field
	codec compress.Codec
}

func withCodec(n parquet.Node, c compress.Codec) parquet.Node { return codecNode{n, c} }

func (n codecNode) Compression() compress.Codec { return leafCodec(n.Node, n.codec) }
func (n codecNode) Fields() []parquet.Field     { return codecFields(n.Node, n.codec) }

func (f codecField) Compression() compress.Codec { return leafCodec(f.Field, f.codec) }
func (f codecField) Fields() []parquet.Field     { return codecFields(f.Field, f.codec) }

func leafCodec(n parquet.Node, c compress.Codec) compress.Codec {
	if n.Leaf() {
		return c
	}
	return n.Compression()
}

func codecFields(n parquet.Node, c compress.Codec) []parquet.Field {
	fs := n.Fields()
	out := make([]parquet.Field, len(fs))
	for i, f := range fs {
		out[i] = codecField{f, c}
	}
	return out
}
