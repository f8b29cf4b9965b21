package vacuum

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
	"github.com/highwater-dev/highwater/manifest"
)

// lake builds a model's log by hand: runs that committed, runs that a later
// commit killed (manifest.Kills), stray attempts, and objects highwater
// never writes.
type lake struct {
	t   *testing.T
	b   objstore.Bucket
	log *manifest.Log
}

func (l *lake) object(key string) {
	l.t.Helper()
	if err := l.b.Put(context.Background(), l.log.Key(key), strings.NewReader("x"), objstore.PutOptions{}); err != nil {
		l.t.Fatal(err)
	}
}

// plan writes a run's plan on the current head and one file of it.
func (l *lake) plan(id, kind string) string {
	l.t.Helper()
	ctx := context.Background()
	st, err := l.log.ReadState(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.log.WritePlan(ctx, &manifest.Plan{RunID: id, Kind: kind, BaseSeq: st.Seq, Created: time.Now()}); err != nil {
		l.t.Fatal(err)
	}
	key := manifest.DataKey(id, "a", 1)
	l.object(key)
	return key
}

func (l *lake) commit(c *manifest.Commit) {
	l.t.Helper()
	_, _, err := l.log.Append(context.Background(), func(st *manifest.State) (*manifest.Commit, error) {
		c.Watermark = st.Watermark
		if manifest.MovesWatermark(c.Kind) {
			w := time.Now().UTC().Format(time.RFC3339Nano)
			c.Watermark = &w
		}
		return c, nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

func TestVacuum(t *testing.T) {
	ctx := context.Background()
	l := &lake{t: t, b: mem.New()}
	l.log = manifest.NewLog(l.b, "m")

	r1 := l.plan("r1", manifest.KindExport)
	l.object(manifest.DataKey("r1", "lost", 1)) // an attempt of r1 that lost
	l.commit(&manifest.Commit{Kind: manifest.KindExport, RunID: "r1", Added: []manifest.File{{Key: r1}}})
	r2 := l.plan("r2", manifest.KindExport) // killed by r3's watermark
	b1 := l.plan("b1", manifest.KindBackfill)
	r3 := l.plan("r3", manifest.KindExport)
	l.commit(&manifest.Commit{Kind: manifest.KindExport, RunID: "r3", Added: []manifest.File{{Key: r3}}})
	l.plan("d1", manifest.KindDedupe) // killed by d2's removal
	d2 := l.plan("d2", manifest.KindDedupe)
	l.commit(&manifest.Commit{Kind: manifest.KindDedupe, RunID: "d2", Added: []manifest.File{{Key: d2}}, Removed: []string{r1}})
	// Keys that no builder makes are never deleted, under a dead run or not.
	strangers := []string{"data/r2/a/notes.txt", "data/r2/a/part-1.parquet", "data/r2/part-000001.parquet", "data/r2/a/x/part-000001.parquet"}
	for _, k := range strangers {
		l.object(k)
	}

	later := func() time.Time { return time.Now().Add(time.Hour) }
	young, err := Run(ctx, l.b, Options{Model: "m", OlderThan: 24 * time.Hour, Now: later})
	if err != nil || len(young.Declared)+len(young.Deleted) != 0 {
		t.Fatalf("within the retention: %+v, %v", young, err)
	}
	wantDeclared := []string{"d1", "r1/lost", "r2"} // b1 is live: no full refresh since
	wantDeleted := []string{manifest.DataKey("d1", "a", 1), r1, manifest.DataKey("r1", "lost", 1), r2}
	dry, err := Run(ctx, l.b, Options{Model: "m", OlderThan: time.Minute, Now: later, DryRun: true})
	if err != nil || !slices.Equal(dry.Declared, wantDeclared) || !slices.Equal(dry.Deleted, wantDeleted) || dry.Commit != nil {
		t.Fatalf("dry run: %+v, %v; want declared %q, deleted %q", dry, err, wantDeclared, wantDeleted)
	}
	res, err := Run(ctx, l.b, Options{Model: "m", OlderThan: time.Minute, Now: later})
	if err != nil || !slices.Equal(res.Declared, wantDeclared) || !slices.Equal(res.Deleted, wantDeleted) || res.Commit == nil {
		t.Fatalf("vacuum: %+v, %v; want declared %q, deleted %q", res, err, wantDeclared, wantDeleted)
	}
	st, err := l.log.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range wantDeclared {
		if _, dead := st.Abandoned[id]; !dead {
			t.Errorf("%s not declared abandoned in the log", id)
		}
	}
	for _, k := range append([]string{r3, d2, b1}, strangers...) {
		if _, err := l.b.Stat(ctx, l.log.Key(k)); err != nil {
			t.Errorf("%s was deleted: %v", k, err)
		}
	}

	// A full refresh kills the backfill; a second vacuum declares only it.
	l.commit(&manifest.Commit{Kind: manifest.KindFullRefresh, RunID: "f1", Removed: []string{r3, d2}})
	res, err = Run(ctx, l.b, Options{Model: "m", OlderThan: time.Minute, Now: later})
	if err != nil || !slices.Equal(res.Declared, []string{"b1"}) || !slices.Equal(res.Deleted, []string{b1, d2, r3}) {
		t.Fatalf("second vacuum: %+v, %v", res, err)
	}
}
