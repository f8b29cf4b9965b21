package export_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestHotStandbySource: a hot standby cannot see the primary's open
// transactions, so only the lookback protects their rows. A lookback too
// short to protect anything is refused before anything is written; with
// the minimum, a primary transaction open across a run is exported.
func TestHotStandbySource(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("a replica needs the throwaway cluster")
	}
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`)
	primary := pg.Server(t)
	replica, err := primary.StartReplica()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replica.Stop)
	catchUp := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := replica.CatchUp(ctx, primary); err != nil {
			t.Fatal(err)
		}
	}

	// A primary transaction stamps its row at its start and stays open
	// while a later one commits: the replay bound passes its start.
	tx, err := l.connect().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), `INSERT INTO items VALUES (2, now(), 'open on the primary', 1)`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	l.exec(`INSERT INTO items VALUES (3, clock_timestamp(), 'committed later', 1)`)
	catchUp()

	standby := *l
	standby.db = replica.On(l.db)
	opts := standby.options()
	opts.Lookback = 0
	if _, err := standby.export(opts); !errors.Is(err, export.ErrUnsafeLookback) {
		t.Fatalf("lookback 0s from a hot standby: want ErrUnsafeLookback, got %v", err)
	} else if !strings.Contains(err.Error(), "hot standby") {
		t.Fatalf("the refusal does not say why: %v", err)
	}
	if st := standby.state(); st.Seq != 0 {
		t.Fatalf("a refused run committed seq %d", st.Seq)
	}

	opts.Lookback = export.MinReplicaLookback
	res := standby.mustExport(opts)
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "hot standby") {
		t.Fatalf("no warning that only the lookback protects: %q", res.Warnings)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	catchUp()
	res2 := standby.mustExport(opts)
	if got := scalar(t, standby.query("SELECT string_agg(DISTINCT id::varchar, ',' ORDER BY id::varchar) FROM lake")); got != "1,2,3" {
		t.Fatalf("lake holds %s; source %v; runs [%s, %s) %s %s, [%s, %s) %s %s", got, standby.pgQuery("SELECT id, updated_at::text FROM items ORDER BY id"),
			deref(res.Plan.Interval.From), res.Plan.Interval.To, res.Plan.ToBound, res.Plan.ToBoundDetail,
			deref(res2.Plan.Interval.From), res2.Plan.Interval.To, res2.Plan.ToBound, res2.Plan.ToBoundDetail)
	}
}
