package dedupe_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/synth"
)

// TestParallelBucket: a bucket is rewritten on several cores (its row
// groups encoded at once, its runs sorted in parallel), and what it writes
// is what one worker writes: the same rows in the same order, one per key,
// the newest, sorted by key in every file, files rolled at the target.
func TestParallelBucket(t *testing.T) {
	const (
		n      = 200_000
		target = 512 << 10
	)
	// Versions of every key in a shuffled order, then newer versions of
	// every third key and a tombstone-free third export of every fifth.
	lake := func(t *testing.T) *destination.Destination {
		d := openDest(t, "file://"+t.TempDir())
		l, err := synth.New(d, "items")
		if err != nil {
			t.Fatal(err)
		}
		l.RowGroupRows = 40_000
		l.TargetFileBytes = 6 << 20
		ctx := context.Background()
		if _, err := l.Export(ctx, n, func(i int, r *synth.Row) {
			id := i * 7919 % n
			*r = synth.Row{ID: int64(id), UpdatedAt: t0 + int64(i), Name: fmt.Sprintf("v1-%046d", id), Price: int64(i)}
		}); err != nil {
			t.Fatal(err)
		}
		for v, step := range []int{3, 5} {
			if _, err := l.Export(ctx, n/step, func(i int, r *synth.Row) {
				id := i * step
				*r = synth.Row{ID: int64(id), UpdatedAt: t0 + int64(n*(v+1)) + int64(i), Name: fmt.Sprintf("v%d-%046d", v+2, id), Price: -int64(id)}
			}); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	want := func(id int) string {
		switch {
		case id%5 == 0 && id/5 < n/5:
			return fmt.Sprintf("v3-%046d", id)
		case id%3 == 0 && id/3 < n/3:
			return fmt.Sprintf("v2-%046d", id)
		}
		return fmt.Sprintf("v1-%046d", id)
	}
	for _, buckets := range []int{1, 2} {
		t.Run(fmt.Sprint(buckets, "buckets"), func(t *testing.T) {
			type output struct {
				res   *dedupe.Result
				rows  [][]string // id, name, file, in commit then file order
				sizes []int64
			}
			run := func(procs int) output {
				d := lake(t)
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				res := runDedupe(t, d, dedupe.Options{Model: "items", Buckets: buckets, TargetFileBytes: target})
				var sizes []int64
				for _, f := range readState(t, d, "items").Files {
					sizes = append(sizes, f.Bytes)
				}
				// localCopies names the files in committed order.
				rows := duck(t, d, "items", `SELECT id, name, parse_filename(filename) FROM read_parquet([$FILES], filename = true, file_row_number = true)
					ORDER BY filename, file_row_number`)
				return output{res, rows, sizes}
			}
			one, many := run(1), run(4)
			if one.res.RowGroupsAtOnce != 1 {
				t.Fatalf("one worker had %d row groups in the encoders at once", one.res.RowGroupsAtOnce)
			}
			if many.res.RowGroupsAtOnce < 2 {
				t.Fatalf("with 4 workers and %d buckets, a bucket had %d row group in the encoders at once: one core did the work",
					buckets, many.res.RowGroupsAtOnce)
			}
			// File boundaries may differ (row groups are smaller with more
			// in flight), the rows in committed order may not.
			keyName := func(a, b []string) bool { return a[0] == b[0] && a[1] == b[1] }
			if !slices.EqualFunc(one.rows, many.rows, keyName) {
				t.Fatalf("4 workers wrote %d rows, 1 worker %d, not the same in the same order", len(many.rows), len(one.rows))
			}
			if len(many.rows) != n || many.res.OutputRows != n {
				t.Fatalf("%d rows out (result: %d), want %d", len(many.rows), many.res.OutputRows, n)
			}
			seen := make([]bool, n)
			prev := map[string]int{} // file -> last id
			for _, r := range many.rows {
				id, err := strconv.Atoi(r[0])
				if err != nil || id < 0 || id >= n || seen[id] {
					t.Fatalf("row %v: not a new key in [0, %d)", r, n)
				}
				seen[id] = true
				if r[1] != want(id) {
					t.Fatalf("key %d: %s won, want %s", id, r[1], want(id))
				}
				if last, ok := prev[r[2]]; ok && last >= id {
					t.Fatalf("file %s: key %d after %d", r[2], id, last)
				}
				prev[r[2]] = id
			}
			for _, o := range []output{one, many} {
				if len(o.sizes) < 2*buckets {
					t.Fatalf("files of %v bytes: want several per bucket at a target of %d", o.sizes, target)
				}
				// A file rolls once its committed row groups reach the
				// target: none but a bucket's last is below it, none far above.
				small := 0
				for _, b := range o.sizes {
					if b < target {
						small++
					}
					if b > 2*target {
						t.Fatalf("files of %v bytes: one is over twice the target of %d", o.sizes, target)
					}
				}
				if small > buckets {
					t.Fatalf("files of %v bytes: %d under the target of %d with %d buckets", o.sizes, small, target, buckets)
				}
			}
			t.Logf("%d files of %v bytes; %d row groups of a bucket in the encoders at once", len(many.sizes), many.sizes, many.res.RowGroupsAtOnce)
		})
	}
}
