package dedupe

import (
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

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

// codecs lets the row groups encoded at once compress their pages at once:
// each call takes one of n codecs (a zstd codec serializes its calls, one
// encoder each). n codecs of 1 MiB windows cost a few MiB, not a history
// per page.
type codecs struct {
	compress.Codec // names the codec; never called
	free           chan compress.Codec
}

func newCodecs(n int, newCodec func() (compress.Codec, error)) (*codecs, error) {
	c := &codecs{free: make(chan compress.Codec, n)}
	for range n {
		one, err := newCodec()
		if err != nil {
			return nil, err
		}
		c.Codec = one
		c.free <- one
	}
	return c, nil
}

func (c *codecs) Encode(dst, src []byte) ([]byte, error) {
	one := <-c.free
	defer func() { c.free <- one }()
	return one.Encode(dst, src)
}

func (c *codecs) Decode(dst, src []byte) ([]byte, error) {
	one := <-c.free
	defer func() { c.free <- one }()
	return one.Decode(dst, src)
}
