package dedupe

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSorterMergesWithinBudget sorts far more runs than one merge may read
// at once: the runs are merged a group at a time, never more at once than
// the budget's buffers allow, and each key still comes out once, with its
// newest version, in key order.
func TestSorterMergesWithinBudget(t *testing.T) {
	const keys = 20_000
	rng := rand.New(rand.NewPCG(1, 2))
	type version struct{ key, v uint64 }
	var all []version
	newest := make([]uint64, keys)
	for k := range uint64(keys) {
		for range 1 + rng.IntN(4) {
			v := rng.Uint64N(1 << 40)
			all = append(all, version{k, v})
			newest[k] = max(newest[k], v)
		}
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// Records as the encoder lays them out: the key, the version
	// descending and the input position in the sort key; the version as
	// the row.
	var in []byte
	for i, x := range all {
		var sk [24]byte
		binary.BigEndian.PutUint64(sk[:], x.key)
		binary.BigEndian.PutUint64(sk[8:], ^x.v)
		binary.BigEndian.PutUint64(sk[16:], uint64(i))
		var hdr [headerLen]byte
		binary.BigEndian.PutUint16(hdr[:], uint16(len(sk)))
		binary.BigEndian.PutUint16(hdr[2:], 8)
		binary.BigEndian.PutUint32(hdr[4:], 8)
		in = append(append(in, hdr[:]...), sk[:]...)
		in = binary.BigEndian.AppendUint64(in, x.v)
	}
	dir, err := newSpillDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.remove()
	s := &sorter{dir: dir, budget: 64 << 10, par: 2}
	next := uint64(0)
	err = s.run(bytes.NewReader(in), int64(len(in)), nil, func(rec []byte) error {
		k := binary.BigEndian.Uint64(recKey(rec))
		if k != next {
			t.Fatalf("key %d came out, want %d", k, next)
		}
		if v := binary.BigEndian.Uint64(recRow(rec)); v != newest[k] {
			t.Fatalf("key %d: version %d won, want %d", k, v, newest[k])
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != keys {
		t.Fatalf("%d keys came out, want %d", next, keys)
	}
	if s.runsWritten <= s.fanIn() || s.mergeWidth > s.fanIn() {
		t.Fatalf("%d runs, merged up to %d at once: want more runs than the %d one merge may read, and no merge wider", s.runsWritten, s.mergeWidth, s.fanIn())
	}
	t.Logf("%d runs, merged up to %d at once", s.runsWritten, s.mergeWidth)
}

// TestSortChunkStretches: a run made of a few stretches already in key
// order (row groups of keys that grow with the modified-at) is merged as
// those stretches, not sorted, and one of more stretches is sorted; either
// way the winners come out as a full sort gives them.
func TestSortChunkStretches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for stretches := 1; stretches <= maxNatural+2; stretches++ {
		// Keys of each stretch ascending, with duplicates across
		// stretches (older versions), each a record of its own.
		s := &sorter{}
		newest := map[uint64]uint64{}
		for st := range stretches {
			k := uint64(0)
			for range 500 + rng.IntN(500) {
				k += 1 + uint64(rng.IntN(2))
				v := uint64(st)<<32 | rng.Uint64N(1<<32)
				var sk [24]byte
				binary.BigEndian.PutUint64(sk[:], k)
				binary.BigEndian.PutUint64(sk[8:], ^v)
				binary.BigEndian.PutUint64(sk[16:], uint64(len(s.offs)))
				var hdr [headerLen]byte
				binary.BigEndian.PutUint16(hdr[:], uint16(len(sk)))
				binary.BigEndian.PutUint16(hdr[2:], 8)
				binary.BigEndian.PutUint32(hdr[4:], 8)
				off := len(s.arena)
				s.arena = binary.BigEndian.AppendUint64(append(append(s.arena, hdr[:]...), sk[:]...), v)
				s.offs = append(s.offs, newSortEnt(s.arena[off:], off))
				newest[k] = max(newest[k], v)
			}
		}
		s.chunks = s.sortChunk(s.offs)
		want := 1
		if stretches <= maxNatural {
			want = stretches
		}
		if len(s.chunks) != want {
			t.Fatalf("%d stretches in order: %d chunks, want %d", stretches, len(s.chunks), want)
		}
		var prev uint64
		n := 0
		err := s.winners(func(rec []byte) error {
			k := binary.BigEndian.Uint64(recKey(rec))
			if n > 0 && k <= prev {
				t.Fatalf("%d stretches: key %d after %d", stretches, k, prev)
			}
			if v := binary.BigEndian.Uint64(recRow(rec)); v != newest[k] {
				t.Fatalf("%d stretches: key %d: version %x won, want %x", stretches, k, v, newest[k])
			}
			prev = k
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != len(newest) {
			t.Fatalf("%d stretches: %d keys came out, want %d", stretches, n, len(newest))
		}
	}
}
