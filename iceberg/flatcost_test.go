package iceberg_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/iceberg"
	"github.com/highwater-dev/highwater/internal/faults"
	"github.com/highwater-dev/highwater/manifest"
)

// TestNoChangeSyncIsFlat counts what the view asks of the store (the file
// backend) after a commit that changes no file and no schema, as a
// no-change export makes, on top of 1 and 300 commits of history (one in
// ten adding a file, each followed by its sync, as commands do): no write
// at all, and the same reads whatever the log's length. A view that lags
// one commit that adds a file reads only that commit of the log, at any
// length.
func TestNoChangeSyncIsFlat(t *testing.T) {
	ctx := context.Background()
	var noChange, oneChange []map[string]int
	for _, n := range []int{1, 300} {
		l := newLake(t, "", itemsDDL, `INSERT INTO items (id, name) VALUES (1, 'one'), (2, 'two')`)
		l.export(false)
		d := l.open()
		c := faults.NewCounting(d.Bucket)
		log := manifest.NewLog(c, l.model)
		v := iceberg.NewView(log, d.ObjectURL(log.Key()))
		st, err := iceberg.Enable(ctx, log)
		if err != nil {
			t.Fatal(err)
		}
		sync := func() *iceberg.Result {
			t.Helper()
			res, err := v.Sync(ctx, st)
			if err != nil {
				t.Fatalf("sync at seq %d: %v", st.Seq, err)
			}
			return res
		}
		sync()
		first, err := log.ReadCommit(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		commit := func(i int, files bool) {
			t.Helper()
			cm := &manifest.Commit{Kind: manifest.KindExport, RunID: manifest.NewRunID(time.Now()), Identity: first.Identity,
				Interval: first.Interval, ToBound: first.ToBound, Watermark: first.Watermark, Metrics: &manifest.Metrics{}}
			if files {
				cm.Added = []manifest.File{{Key: fmt.Sprintf("data/%s/a/part-%d.parquet", cm.RunID, i), Rows: 1, Bytes: 100, SchemaID: st.Schema.ID}}
			}
			if err := log.Commit(ctx, st, cm); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			commit(i, i%10 == 9)
			sync()
		}

		commit(n, false)
		c.Reset()
		res := sync()
		t.Logf("a no-change sync on %d commits: %s", n, c)
		if res.Published != 0 || res.To != st.Seq {
			t.Fatalf("a no-change sync on %d commits: %+v, want nothing published and the view at seq %d", n, res, st.Seq)
		}
		noChange = append(noChange, c.Counts())

		commit(n+1, true)
		c.Reset()
		if res := sync(); res.Published != 1 || res.To != st.Seq {
			t.Fatalf("a sync of one commit adding a file: %+v, want one version, at seq %d", res, st.Seq)
		}
		t.Logf("a sync of one commit adding a file, on %d commits: %s", n, c)
		oneChange = append(oneChange, c.Counts())
	}
	for _, w := range []string{"put", "delete"} {
		if k := noChange[0][w] + noChange[1][w]; k != 0 {
			t.Errorf("a no-change sync asks for %d %ss: %v", k, w, noChange)
		}
	}
	if !maps.Equal(noChange[0], noChange[1]) {
		t.Errorf("a no-change sync asks more of the store at 300 commits than at 1:\n   1: %v\n 300: %v", noChange[0], noChange[1])
	}
	if oneChange[1]["get"] != oneChange[0]["get"] {
		t.Errorf("a sync of one commit reads more at 300 commits than at 1:\n   1: %v\n 300: %v", oneChange[0], oneChange[1])
	}
}
