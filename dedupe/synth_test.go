package dedupe_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/synth"
)

const t0 = int64(1_767_225_600_000_000) // 2026-01-01 UTC in µs

// TestSynthBuckets: versions spread over several exports collapse to the
// newest per key, and a second dedupe rewrites only touched buckets.
func TestSynthBuckets(t *testing.T) {
	ctx := context.Background()
	d := openDest(t, "file://"+t.TempDir())
	lake, err := synth.New(d, "items")
	if err != nil {
		t.Fatal(err)
	}
	// 20,000 keys, then two rounds of updates of every 3rd and 7th key.
	if _, err := lake.Export(ctx, 20_000, func(i int, r *synth.Row) {
		*r = synth.Row{ID: int64(i), UpdatedAt: t0 + int64(i), Name: fmt.Sprint("v1-", i), Price: int64(i)}
	}); err != nil {
		t.Fatal(err)
	}
	for round, step := range []int{3, 7} {
		if _, err := lake.Export(ctx, 20_000/step, func(i int, r *synth.Row) {
			id := i * step
			*r = synth.Row{ID: int64(id), UpdatedAt: t0 + 1_000_000*int64(round+1) + int64(id), Name: fmt.Sprintf("v%d-%d", round+2, id), Price: int64(id * 10)}
		}); err != nil {
			t.Fatal(err)
		}
	}
	res := runDedupe(t, d, dedupe.Options{Model: "items", Buckets: 8})
	if !res.FullRewrite || res.Commit == nil || res.OutputRows != 20_000 {
		t.Fatalf("first dedupe: %+v", res)
	}
	want := func(id int) string {
		switch {
		case id%7 == 0 && id/7 < 20_000/7:
			return fmt.Sprint("v3-", id)
		case id%3 == 0 && id/3 < 20_000/3:
			return fmt.Sprint("v2-", id)
		}
		return fmt.Sprint("v1-", id)
	}
	check := func() {
		t.Helper()
		rows := duck(t, d, "items", "SELECT id, name FROM lake ORDER BY id")
		if len(rows) != 20_000 {
			t.Fatalf("lake has %d rows, want 20000", len(rows))
		}
		for i, r := range rows {
			if r[0] != fmt.Sprint(i) || r[1] != want(i) {
				t.Fatalf("row %d: %v, want %d %s", i, r, i, want(i))
			}
		}
	}
	check()
	// Each file is sorted by id, and holds one bucket.
	if got := scalar(t, duck(t, d, "items", `SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY filename ORDER BY file_row_number) AS prev
		FROM read_parquet([$FILES], filename = true, file_row_number = true)) WHERE prev >= id`)); got != "0" {
		t.Fatalf("%s rows are out of key order", got)
	}

	again := runDedupe(t, d, dedupe.Options{Model: "items"})
	if again.Commit != nil || again.Reason == "" {
		t.Fatalf("second dedupe with nothing new committed: %+v", again)
	}

	// Touch 3 keys: only their buckets are rewritten.
	if _, err := lake.Export(ctx, 3, func(i int, r *synth.Row) {
		id := []int{5, 11, 13}[i]
		*r = synth.Row{ID: int64(id), UpdatedAt: t0 + 9_000_000, Name: fmt.Sprint("v9-", id)}
	}); err != nil {
		t.Fatal(err)
	}
	small := runDedupe(t, d, dedupe.Options{Model: "items"})
	if small.FullRewrite || small.BucketsTouched > 3 || small.BucketsTouched < 1 {
		t.Fatalf("small dedupe: %+v", small)
	}
	t.Logf("full rewrite wrote %d bytes; 3 changed keys rewrote %d bytes in %d of %d buckets",
		res.OutputBytes, small.OutputBytes, small.BucketsTouched, small.Layout.Buckets)
	if small.OutputBytes*2 > res.OutputBytes {
		t.Fatalf("small change rewrote %d bytes of %d", small.OutputBytes, res.OutputBytes)
	}
	prev := want
	want = func(id int) string {
		if id == 5 || id == 11 || id == 13 {
			return fmt.Sprint("v9-", id)
		}
		return prev(id)
	}
	check()
}
