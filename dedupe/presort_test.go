package dedupe_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/synth"
)

// TestPresortMatchesSpill: with few buckets the partition stage sorts the
// runs itself, so that the records cross the disk once (as the sorted
// runs) instead of twice (into a spill file by bucket, then into its
// sorted runs); a first and an incremental dedupe write the same rows in
// the same files, in the same order, as the dedupe that spills by bucket.
func TestPresortMatchesSpill(t *testing.T) {
	const n = 300_000
	// More records than the sort budget holds: versions of every key in a
	// shuffled order, then newer versions of every third key.
	lake := func(t *testing.T) (*destination.Destination, *synth.Lake) {
		d := openDest(t, "file://"+t.TempDir())
		l, err := synth.New(d, "items")
		if err != nil {
			t.Fatal(err)
		}
		l.RowGroupRows = 40_000
		l.TargetFileBytes = 8 << 20
		ctx := context.Background()
		if _, err := l.Export(ctx, n, func(i int, r *synth.Row) {
			id := i * 7919 % n
			*r = synth.Row{ID: int64(id), UpdatedAt: t0 + int64(i), Name: fmt.Sprintf("v1-%046d", id), Price: int64(i)}
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Export(ctx, n/3, func(i int, r *synth.Row) {
			*r = synth.Row{ID: int64(i * 3), UpdatedAt: t0 + n + int64(i), Name: fmt.Sprintf("v2-%046d", i*3), Price: -int64(i)}
		}); err != nil {
			t.Fatal(err)
		}
		return d, l
	}
	// Then newer versions of every seventh key, into the deduped lake.
	incr := func(t *testing.T, l *synth.Lake) {
		if _, err := l.Export(context.Background(), n/7, func(i int, r *synth.Row) {
			*r = synth.Row{ID: int64(i * 7), UpdatedAt: t0 + 2*n + int64(i), Name: fmt.Sprintf("v3-%046d", i*7), Price: int64(i)}
		}); err != nil {
			t.Fatal(err)
		}
	}
	type output struct {
		res  []*dedupe.Result
		rows [][]string // id, name in commit then file order
		per  []int64    // rows of each file
	}
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprint(buckets, "buckets"), func(t *testing.T) {
			run := func(spill bool) output {
				d, l := lake(t)
				opts := dedupe.Options{Model: "items", Buckets: buckets, TargetFileBytes: 4 << 20}
				if spill {
					dedupe.WithoutPresort(&opts)
				}
				var o output
				o.res = append(o.res, runDedupe(t, d, opts))
				incr(t, l)
				o.res = append(o.res, runDedupe(t, d, opts))
				for _, f := range readState(t, d, "items").Files {
					o.per = append(o.per, f.Rows)
				}
				o.rows = duck(t, d, "items", `SELECT id, name FROM read_parquet([$FILES], filename = true, file_row_number = true)
					ORDER BY filename, file_row_number`)
				return o
			}
			sorted, spilled := run(false), run(true)
			for i, res := range sorted.res {
				if res.RecordBytes == 0 || res.SpilledBytes > res.RecordBytes {
					t.Fatalf("dedupe %d: %d bytes of records spilled for %d bytes of new records: they crossed the disk more than once",
						i+1, res.SpilledBytes, res.RecordBytes)
				}
				if !res.Presorted || spilled.res[i].Presorted {
					t.Fatalf("dedupe %d: presorted %v without the option, %v with it", i+1, res.Presorted, spilled.res[i].Presorted)
				}
				if res.OutputRows != n || spilled.res[i].OutputRows != n {
					t.Fatalf("dedupe %d: %d rows out presorted, %d spilled, want %d", i+1, res.OutputRows, spilled.res[i].OutputRows, n)
				}
			}
			if r := sorted.res[0]; r.SortRuns < 2 {
				t.Fatalf("the first dedupe wrote %d sort runs: the records fitted in memory, the test needs more of them", r.SortRuns)
			}
			if !slices.Equal(sorted.per, spilled.per) {
				t.Fatalf("files of %v rows presorted, %v spilled", sorted.per, spilled.per)
			}
			if !slices.EqualFunc(sorted.rows, spilled.rows, slices.Equal) {
				t.Fatalf("presorted, %d rows in committed order; spilled, %d rows not the same or not in the same order", len(sorted.rows), len(spilled.rows))
			}
			for i, id := range []int{0, 3, 7, 21, 22} {
				want := []string{"v3", "v2", "v3", "v3", "v1"}[i]
				var got string
				for _, r := range sorted.rows {
					if r[0] == fmt.Sprint(id) {
						got = r[1][:2]
					}
				}
				if got != want {
					t.Fatalf("key %d: version %q won, want %s", id, got, want)
				}
			}
			for i, res := range sorted.res {
				t.Logf("dedupe %d: %d sort runs; %.1f MiB of records, %.1f MiB spilled presorted, %.1f MiB spilled by bucket",
					i+1, res.SortRuns, float64(res.RecordBytes)/(1<<20), float64(res.SpilledBytes)/(1<<20), float64(spilled.res[i].SpilledBytes)/(1<<20))
			}
		})
	}
}
