package formats

import (
	"math/rand/v2"
	"testing"
)

// TestBatchFailedRowLeavesNoTrace makes a row fail at each column in turn,
// after the columns before it (a LIST among them) took their values, with
// good rows before and after it in the same batch: the file written from
// the batch must be the same bytes as the one written from the good rows.
func TestBatchFailedRowLeavesNoTrace(t *testing.T) {
	m, err := NewMapping(batchColumns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A value each column refuses: wrong widths, a truncated array.
	bad := map[int][]byte{
		0: make([]byte, 3),
		2: {0, 1},
		3: make([]byte, 7),
		4: make([]byte, 15),
		5: {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 4},
		6: {1, 1},
	}
	for col, v := range bad {
		t.Run(batchColumns[col].Name, func(t *testing.T) {
			tw := newTwinFiles(t, m, WriterOptions{RowGroupRows: 1000, RowGroupBytes: 1 << 20})
			rng := rand.New(rand.NewPCG(5, uint64(col)))
			for i := range 200 {
				vals := batchRow(rng, i)
				if i%10 == 5 {
					vals[col] = v
					if err := m.AppendBatch(tw.b, vals, int64(i), false); err == nil {
						t.Fatalf("row %d: column %s took a bad value", i, batchColumns[col].Name)
					}
					continue
				}
				tw.add(vals, int64(i), false)
			}
			tw.flush()
			tw.close(nil)
			if !tw.same() {
				t.Fatalf("a row that failed at column %s changed the file written from the batch", batchColumns[col].Name)
			}
		})
	}
}
