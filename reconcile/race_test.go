package reconcile_test

import (
	"errors"
	"testing"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/reconcile"
)

// TestRepairRaces runs a repair whose commit meets other commits: it
// rebases over a dedupe and an export, which leave the files it was judged
// against in place, and gives up, committing nothing, when a full refresh
// replaced them.
func TestRepairRaces(t *testing.T) {
	l := newLake(t, itemsTable)
	l.export()
	l.exec(`UPDATE items SET name = 'unseen' WHERE id = 3`, `DELETE FROM items WHERE id = 4`,
		`UPDATE items SET name = 'seen', updated_at = now() WHERE id = 5`)
	meanwhile := func(do func()) reconcile.Options {
		return reconcile.Options{Repair: true, Failpoint: func(name string) {
			if name == "reconcile-before-commit" {
				do()
			}
		}}
	}
	res := l.reconcile(meanwhile(func() { l.export(); l.dedupe() }))
	if res.Commit.Seq != 4 || len(res.Commit.Added) != 1 {
		t.Fatalf("the repair after an export and a dedupe: %+v", res.Commit)
	}
	l.dedupe()
	check(t, l.reconcile(reconcile.Options{}), want{matched: 99})

	l.exec(`UPDATE items SET name = 'unseen again' WHERE id = 6`)
	_, err := l.tryReconcile(meanwhile(func() {
		ctx, cancel := l.ctx()
		defer cancel()
		src, d := l.open(ctx)
		if _, err := export.Run(ctx, src, d, d.ObjectURL, export.Options{Model: l.model, Source: l.spec, FullRefresh: true}); err != nil {
			t.Fatal(err)
		}
	}))
	if !errors.Is(err, manifest.ErrSuperseded) {
		t.Fatalf("a repair after a full refresh: %v", err)
	}
	if st := l.state(); st.Seq != 7 {
		t.Fatalf("head at seq %d after the refused repair, want the full refresh's 7", st.Seq)
	}
	check(t, l.reconcile(reconcile.Options{}), want{matched: 99})
}
