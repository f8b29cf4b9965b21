package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/synth"
)

// TestBucketFileOutOfOrder: an incremental dedupe reads a bucket's files
// as runs sorted by key, as the last dedupe wrote them. A bucket file whose
// rows are not in key order (written by something else) must stop the
// dedupe, with nothing committed, rather than give a wrong result.
func TestBucketFileOutOfOrder(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d := openDest(t, "file://"+root)
	lake, err := synth.New(d, "items")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lake.Export(ctx, 2_000, func(i int, r *synth.Row) {
		*r = synth.Row{ID: int64(i), UpdatedAt: t0 + int64(i), Name: fmt.Sprint("v1-", i), Price: int64(i)}
	}); err != nil {
		t.Fatal(err)
	}
	if res := runDedupe(t, d, dedupe.Options{Model: "items", Buckets: 1}); res.Commit == nil || res.OutputRows != 2_000 {
		t.Fatalf("first dedupe: %+v", res)
	}
	st := readState(t, d, "items")
	if len(st.Files) != 1 {
		t.Fatalf("%d files after the first dedupe, want 1", len(st.Files))
	}
	// The same rows, footer metadata and codec, the rows in reverse.
	path := filepath.Join(root, "items", filepath.FromSlash(st.Files[0].Key))
	reverseRows(t, path)

	if _, err := lake.Export(ctx, 10, func(i int, r *synth.Row) {
		*r = synth.Row{ID: int64(i * 100), UpdatedAt: t0 + 10_000 + int64(i), Name: fmt.Sprint("v2-", i*100), Price: -1}
	}); err != nil {
		t.Fatal(err)
	}
	before := readState(t, d, "items").Seq
	_, err = dedupe.Run(ctx, d, d.ObjectURL, dedupe.Options{Model: "items"})
	if err == nil || !strings.Contains(err.Error(), "not in key order") {
		t.Fatalf("dedupe over a bucket file out of order: %v, want an error saying so", err)
	}
	if after := readState(t, d, "items").Seq; after != before {
		t.Fatalf("the log moved from seq %d to %d", before, after)
	}
}

// reverseRows rewrites the Parquet file at path with its rows reversed.
func reverseRows(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		t.Fatal(err)
	}
	var rows []parquet.Row
	for _, rg := range pf.RowGroups() {
		rr := rg.Rows()
		buf := make([]parquet.Row, 64)
		for {
			n, err := rr.ReadRows(buf)
			for _, r := range buf[:n] {
				rows = append(rows, r.Clone())
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rr.Close()
	}
	slices.Reverse(rows)
	opts := []parquet.WriterOption{pf.Schema()}
	for _, kv := range pf.Metadata().KeyValueMetadata {
		opts = append(opts, parquet.KeyValueMetadata(kv.Key, kv.Value))
	}
	out, err := os.Create(path + ".new")
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewWriter(out, opts...)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}
