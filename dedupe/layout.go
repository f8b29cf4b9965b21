package dedupe

import (
	"encoding/json"
	"fmt"

	"github.com/highwater-dev/highwater/manifest"
)

// Layout is the copy-on-write layout of a deduped model, recorded in the
// dedupe commit (manifest.Commit.Layout). Every row belongs to bucket
// fnv1a64(ordered key) mod Buckets; after a dedupe each bucket holds one
// file set sorted by key, so a later dedupe rewrites only the buckets that
// new rows hash to.
type Layout struct {
	Scheme  string `json:"scheme"` // "key_hash"
	Hash    string `json:"hash"`   // "fnv1a64-ordered-key-v1"
	Buckets int    `json:"buckets"`
}

const (
	layoutScheme = "key_hash"
	layoutHash   = "fnv1a64-ordered-key-v1"
	// relayoutFactor: when the average bucket grows past this many target
	// file sizes, the next dedupe rewrites everything into more buckets,
	// so that a small change never rewrites a huge bucket.
	relayoutFactor = 4
	maxBuckets     = 512 // one spill file open per bucket during a full rewrite
)

func (l Layout) bucketOf(hash uint64) int { return int(hash % uint64(l.Buckets)) }

func (l Layout) encode() json.RawMessage {
	b, _ := json.Marshal(l)
	return b
}

// committedLayout reads the state's layout; ok is false when there is none
// that this build understands.
func committedLayout(st *manifest.State) (Layout, bool, error) {
	if len(st.Layout) == 0 {
		return Layout{}, false, nil
	}
	var l Layout
	if err := json.Unmarshal(st.Layout, &l); err != nil {
		return Layout{}, false, fmt.Errorf("read the committed dedupe layout: %w", err)
	}
	if l.Scheme != layoutScheme || l.Hash != layoutHash || l.Buckets < 1 {
		return Layout{}, false, nil
	}
	return l, true, nil
}

// chooseBuckets sizes a new layout so that a bucket holds about one target
// file of compressed data. The input bytes include duplicates, so buckets
// come out at most that large.
// With more than one bucket, the count is rounded up to a multiple of the
// workers that rewrite buckets at once, so that none sits idle while the
// last bucket is written.
func chooseBuckets(inputBytes, target int64, workers int) int {
	n := int((inputBytes + target - 1) / target)
	if n > 1 && workers > 1 {
		n = (n + workers - 1) / workers * workers
	}
	return max(1, min(n, maxBuckets))
}
