package manifest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

// Every key DataKey builds parses back to its parts, and no other key
// parses: vacuum deletes by what the parser says.
func TestParseDataKey(t *testing.T) {
	for _, tc := range []struct {
		run, attempt string
		n            int
	}{
		{"20260101T000000.000000Z-abcd0123", "20260101T000001.000000Z-ef456789", 1},
		{"r", "a", 999999},
		{"r", "a", 1000000}, // past the padding
	} {
		key := DataKey(tc.run, tc.attempt, tc.n)
		run, attempt, n, ok := ParseDataKey(key)
		if !ok || run != tc.run || attempt != tc.attempt || n != tc.n {
			t.Errorf("ParseDataKey(%q) = %q, %q, %d, %v", key, run, attempt, n, ok)
		}
	}
	for _, key := range []string{
		"", "data", "data/r/a", "data/r/a/", "data//a/part-000001.parquet", "data/r//part-000001.parquet",
		"data/r/a/part-1.parquet", "data/r/a/part-0000001.parquet", "data/r/a/part-000000.parquet",
		"data/r/a/part-00000x.parquet", "data/r/a/part-+00001.parquet", "data/r/a/part-000001.parquet.tmp",
		"data/r/a/b/part-000001.parquet", "x/data/r/a/part-000001.parquet", "data/r/a/.hw-tmp-1",
		"data/./a/part-000001.parquet", "data/r/../part-000001.parquet",
	} {
		if run, attempt, n, ok := ParseDataKey(key); ok {
			t.Errorf("ParseDataKey(%q) = %q, %q, %d: want not ok", key, run, attempt, n)
		}
	}
}

func TestParsePlanKey(t *testing.T) {
	if id, ok := parsePlanKey(planKey("20260101T000000.000000Z-abcd0123")); !ok || id != "20260101T000000.000000Z-abcd0123" {
		t.Errorf("round trip: %q, %v", id, ok)
	}
	for _, key := range []string{"_runs/plan.json", "_runs//plan.json", "_runs/a/b/plan.json", "_runs/r/ckpt-000001.json",
		"_runs/r/plan.json.tmp", "runs/r/plan.json", "_runs/../plan.json", "_runs/./plan.json"} {
		if id, ok := parsePlanKey(key); ok {
			t.Errorf("parsePlanKey(%q) = %q: want not ok", key, id)
		}
	}
}

// ListRuns names the runs with a plan and nothing else under _runs/.
func TestListRunsIgnoresStrangers(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	l := NewLog(b, "m")
	for _, id := range []string{"r2", "r1"} {
		if err := l.WritePlan(ctx, &Plan{RunID: id, Kind: KindExport}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"m/_runs/r3/ckpt-000001.json", "m/_runs/a/b/plan.json", "m/_runs/plan.json", "m/_runs/r4/plan.json.tmp"} {
		put(t, b, key, []byte("{}"))
	}
	runs, err := l.ListRuns(ctx)
	if err != nil || !slices.Equal(runs, []string{"r1", "r2"}) {
		t.Fatalf("ListRuns: %q, %v; want r1, r2", runs, err)
	}
}

// A model is a prefix with a log; other JSON under a _manifests/ is not.
func TestListModels(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	commitN(t, b, 1) // model m
	if err := NewLog(b, "team/orders").Commit(ctx, &State{}, exportCommit(1)); err != nil {
		t.Fatal(err)
	}
	put(t, b, "cp/_manifests/00000000000000000050.checkpoint.json", []byte("{}"))
	for _, key := range []string{"stray/_manifests/notes.json", "stray/_manifests/_last_checkpoint",
		"_manifests/00000000000000000001.json", "m2/data/_manifests.json", "other/file.json"} {
		put(t, b, key, []byte("{}"))
	}
	models, err := ListModels(ctx, b)
	if err != nil || !slices.Equal(models, []string{"cp", "m", "team/orders"}) {
		t.Fatalf("ListModels: %q, %v; want cp, m, team/orders", models, err)
	}
}

// ListRunsSince names the runs whose id was made at or after a time, and
// RunIDTime reads that time back from any id NewRunID makes.
func TestListRunsSince(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	l := NewLog(b, "m")
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 5 {
		id := NewRunID(base.Add(time.Duration(i) * time.Minute))
		if at, ok := RunIDTime(id); !ok || !at.Equal(base.Add(time.Duration(i)*time.Minute)) {
			t.Fatalf("RunIDTime(%s) = %v, %v", id, at, ok)
		}
		if err := l.WritePlan(ctx, &Plan{RunID: id, Kind: KindExport}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, tc := range []struct {
		since time.Time
		want  []string
	}{
		{time.Time{}, ids},
		{base, ids},
		{base.Add(2 * time.Minute), ids[2:]},
		{base.Add(2*time.Minute + time.Microsecond), ids[3:]},
		{base.Add(time.Hour), nil},
	} {
		got, err := l.ListRunsSince(ctx, tc.since)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("since %v: %q, %v; want %q", tc.since, got, err, tc.want)
		}
	}
	for _, id := range []string{"r1", "20261201T100000.000000Z", "2026-12-01-x"} {
		if _, ok := RunIDTime(id); ok {
			t.Errorf("RunIDTime(%q) read a time", id)
		}
	}
}
