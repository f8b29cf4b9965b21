package formats

import (
	"runtime"
	"testing"
	"weak"
)

// A value too large for the arena's blocks is made on its own, and Reset
// lets it go, whether its row was appended or failed and was dropped: a
// batch that once held a 50 MiB value must not keep it for the rest of the
// run. Values of the blocks are not cleared (the blocks are kept anyway).
func TestBatchResetLetsLargeValuesGo(t *testing.T) {
	m, err := NewMapping([]Column{{Name: "s", TypeOID: oidText}, {Name: "ts", TypeOID: oidTimestamptz}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]byte, 8)
	for _, tc := range []struct {
		name   string
		tsWire []byte // a timestamp of 7 bytes fails the row after s
	}{
		{"appended", ts},
		{"failed", ts[:7]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := m.NewBatch()
			for range 3 {
				if err := m.AppendBatch(b, [][]byte{[]byte("small"), ts}, 1, false); err != nil {
					t.Fatal(err)
				}
			}
			big := make([]byte, 1<<20)
			err := m.AppendBatch(b, [][]byte{big, tc.tsWire}, 1, false)
			if (err != nil) != (len(tc.tsWire) != 8) {
				t.Fatalf("append: %v", err)
			}
			// The batch's copy of the value, wherever the row left it.
			held := b.cols[0][:cap(b.cols[0])][3].ByteArray()
			if len(held) != len(big) {
				t.Fatalf("the fourth value of s holds %d bytes, want the large value's %d", len(held), len(big))
			}
			copyOf := weak.Make(&held[0])
			held = nil
			b.Reset()
			runtime.GC()
			runtime.GC()
			if copyOf.Value() != nil {
				t.Fatal("the batch keeps a large value after Reset")
			}
			runtime.KeepAlive(b)
		})
	}
}
