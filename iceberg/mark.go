package iceberg

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"

	"github.com/apache/iceberg-go"

	"github.com/highwater-dev/highwater/manifest"
)

// Keys of a snapshot's summary that say what table it shows.
const (
	// SummaryFiles is the sum (mod 2^256) of the SHA-256 of the keys of
	// the committed set, as 64 hex digits.
	SummaryFiles = "highwater.files-sum"
	// SummarySchema is the id of the log's schema.
	SummarySchema = "highwater.schema-id"
)

// mark says what table a state of the log shows: its committed set and its
// schema. Most commits change neither (an export that found no row, a
// reset, a vacuum): they make no snapshot, and the view is up to date when
// its current snapshot's mark is the log head's, which a sync checks from
// the state it was given and the newest metadata alone, however long the
// log. A sum of the keys' hashes, rather than a hash of the list, lets a
// sync step back over a commit in the time its file lists take (undo).
type mark struct {
	files  [4]uint64 // little-endian limbs of the sum
	schema string
}

// markOf is the mark of st.
func markOf(st *manifest.State) mark {
	m := mark{schema: schemaAt(st, st.Seq)}
	for _, f := range st.Files {
		m.add(f.Key)
	}
	return m
}

// schemaAt is the id of st's schema as of seq, for seq up to st.Seq.
func schemaAt(st *manifest.State, seq int64) string {
	if len(st.SchemaHistory) == 0 {
		// A state folded from a checkpoint older than the history.
		if st.Schema != nil {
			return st.Schema.ID
		}
		return ""
	}
	id := ""
	for _, ch := range st.SchemaHistory {
		if ch.Seq > seq {
			break
		}
		id = ch.SchemaID
	}
	return id
}

func keyHash(key string) [4]uint64 {
	h := sha256.Sum256([]byte(key))
	var out [4]uint64
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(h[8*i:])
	}
	return out
}

func (m *mark) add(key string) {
	h := keyHash(key)
	var c uint64
	for i := range m.files {
		m.files[i], c = bits.Add64(m.files[i], h[i], c)
	}
}

func (m *mark) sub(key string) {
	h := keyHash(key)
	var b uint64
	for i := range m.files {
		m.files[i], b = bits.Sub64(m.files[i], h[i], b)
	}
}

// undo steps m, the mark of st as of c.Seq, back over c: the mark as of
// c.Seq-1. It is exact for the logs highwater writes, whose commits remove
// only committed files and add only new ones; a mark made wrong by any
// other log only makes a sync read further back (see View.lag).
func (m mark) undo(st *manifest.State, c *manifest.Commit) mark {
	for _, f := range c.Added {
		m.sub(f.Key)
	}
	for _, k := range c.Removed {
		m.add(k)
	}
	m.schema = schemaAt(st, c.Seq-1)
	return m
}

func (m mark) filesHex() string {
	var b [32]byte
	for i, l := range m.files {
		binary.BigEndian.PutUint64(b[8*(3-i):], l)
	}
	return hex.EncodeToString(b[:])
}

// put records m in a snapshot's summary.
func (m mark) put(p iceberg.Properties) {
	p[SummaryFiles] = m.filesHex()
	p[SummarySchema] = m.schema
}

// is reports whether a snapshot's summary records m; a snapshot written
// before marks existed records none.
func (m mark) is(p iceberg.Properties) bool {
	f, ok := p[SummaryFiles]
	return ok && f == m.filesHex() && p[SummarySchema] == m.schema
}

// changes reports whether c changes the table that st shows: its files,
// or its schema.
func changes(st *manifest.State, c *manifest.Commit) bool {
	return len(c.Added) > 0 || len(c.Removed) > 0 || schemaAt(st, c.Seq) != schemaAt(st, c.Seq-1)
}
