package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
)

// lateWriters run transactions that stamp rows with now() (their start)
// and commit up to 1.6 s later, while exports run back to back.
func lateWriters(t *testing.T, db string, n int, stop <-chan struct{}) (wait func() int64) {
	var wg sync.WaitGroup
	var committed atomic.Int64
	var nextID atomic.Int64
	nextID.Store(1_000_000)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			conn, err := pgx.Connect(context.Background(), db)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx := context.Background()
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				id := nextID.Add(1)
				_, err = tx.Exec(ctx, `INSERT INTO items VALUES ($1, now(), $2)`, id, fmt.Sprint("late-", id))
				if err == nil {
					_, err = tx.Exec(ctx, `UPDATE items SET updated_at = now(), payload = $1 WHERE id = $2`, fmt.Sprint("upd-", id), 1+rng.IntN(500))
				}
				if err != nil {
					t.Error(err)
					tx.Rollback(ctx)
					return
				}
				time.Sleep(time.Duration(rng.IntN(1600)) * time.Millisecond)
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				committed.Add(1)
			}
		}()
	}
	return func() int64 { wg.Wait(); return committed.Load() }
}

// TestLateCommits runs 30 exports back to back while writers commit late:
// with a 2 s lookback (which covers the 1.6 s delays), and with no
// lookback, where only the open-transaction bound saves the rows.
func TestLateCommits(t *testing.T) {
	for _, lookback := range []string{"2s", "0s"} {
		t.Run("lookback="+lookback, func(t *testing.T) {
			db := itemsSetup(t, 500)
			s := fileStore(t)
			stop := make(chan struct{})
			wait := lateWriters(t, db, 4, stop)
			for i := 0; i < 30; i++ {
				r := hw(t, nil, exportArgs(db, s, "--lookback", lookback)...)
				if r.code != 0 {
					close(stop)
					wait()
					t.Fatalf("export %d: %s", i, r.stderr)
				}
			}
			close(stop)
			txs := wait()
			// The writers are done: one last run takes what they
			// committed after the previous run's bound.
			if r := hw(t, nil, exportArgs(db, s, "--lookback", lookback)...); r.code != 0 {
				t.Fatal(r.stderr)
			}
			faultsInjected.Add(txs)
			compare(t, s, "items", db)
			t.Logf("lookback %s: 31 exports, %d late-committing transactions, nothing lost", lookback, txs)
		})
	}
}

// boundOf computes the upper bound of items as role url sees it.
func boundOf(t *testing.T, url string, o pgsource.BoundOptions) pgsource.Bound {
	t.Helper()
	src, err := pgsource.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	tab, err := src.Discover(t.Context(), pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.UpperBoundWith(t.Context(), tab, "UTC", o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openTx begins a transaction that has written a row stamped now(), and
// returns its start.
func openTx(t *testing.T, db string) (pgx.Tx, time.Time) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var start time.Time
	if err := tx.QueryRow(t.Context(), `INSERT INTO items VALUES (999999, now(), 'late') RETURNING updated_at`).Scan(&start); err != nil {
		t.Fatal(err)
	}
	return tx, start
}

// TestBoundKinds shows what fixes the bound, and the cases in which it
// cannot protect a late commit (see docs/guarantees.md).
func TestBoundKinds(t *testing.T) {
	db := itemsSetup(t, 10)
	if b := boundOf(t, db, pgsource.BoundOptions{}); b.Kind != "clock" {
		t.Fatalf("no open transaction: kind %s (%s)", b.Kind, b.Detail)
	}

	tx, start := openTx(t, db)
	time.Sleep(20 * time.Millisecond)
	b := boundOf(t, db, pgsource.BoundOptions{})
	if b.Kind != "oldest_transaction" || b.Mod != watermark.Value(start.UnixMicro()) {
		t.Fatalf("open transaction since %s: bound %s kind %s (%s)", start, b.To, b.Kind, b.Detail)
	}

	// The bound off: To is the clock, past the open transaction's rows,
	// so with no lookback its row would land below the next from.
	off := boundOf(t, db, pgsource.BoundOptions{ClockOnly: true})
	if off.Kind != "fallback_lookback" || off.Mod <= watermark.Value(start.UnixMicro()) || !strings.Contains(off.Detail, "off") {
		t.Fatalf("bound off: %s kind %s (%s)", off.To, off.Kind, off.Detail)
	}

	// Open longer than the cap: ignored, and reported so the next run's
	// from can stay below it.
	time.Sleep(250 * time.Millisecond)
	capped := boundOf(t, db, pgsource.BoundOptions{StuckCap: 200 * time.Millisecond})
	if capped.Kind != "clock" || capped.StuckSince == nil || !strings.Contains(capped.Detail, "longer than the cap") {
		t.Fatalf("stuck writer: %s kind %s stuck %v (%s)", capped.To, capped.Kind, capped.StuckSince, capped.Detail)
	}
	if want := watermark.Format(watermark.Timestamptz, watermark.Value(start.UnixMicro())); *capped.StuckSince != want {
		t.Fatalf("stuck since %s, want %s", *capped.StuckSince, want)
	}

	// A role without pg_read_all_stats cannot see the postgres session's
	// transaction: the bound falls back to the clock, and says so.
	execSQL(t, db, `DO $$ BEGIN CREATE ROLE hw_noprivs LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`GRANT SELECT ON items TO hw_noprivs`)
	blind := boundOf(t, strings.Replace(db, "postgres@", "hw_noprivs@", 1), pgsource.BoundOptions{})
	if blind.Kind != "fallback_lookback" || !strings.Contains(blind.Detail, "pg_read_all_stats") || blind.Mod <= watermark.Value(start.UnixMicro()) {
		t.Fatalf("role without pg_read_all_stats: %s kind %s (%s)", blind.To, blind.Kind, blind.Detail)
	}
	tx.Rollback(t.Context())

	// A prepared transaction bounds by its PREPARE time.
	execSQL(t, db, `BEGIN; INSERT INTO items VALUES (888888, now(), 'prepared'); PREPARE TRANSACTION 'hw_faults_prep'`)
	t.Cleanup(func() { execSQL(t, db, `ROLLBACK PREPARED 'hw_faults_prep'`) })
	if b := boundOf(t, db, pgsource.BoundOptions{}); b.Kind != "prepared_transaction" {
		t.Fatalf("prepared transaction: kind %s (%s)", b.Kind, b.Detail)
	}
}

// TestApplicationStampLost shows the case no bound saves: a row whose
// stamp the application set from a clock behind the database's, with no
// lookback to cover the skew. The test asserts the loss, so that the
// documentation of it stays true.
func TestApplicationStampLost(t *testing.T) {
	db := itemsSetup(t, 10)
	s := fileStore(t)
	if r := hw(t, nil, exportArgs(db, s, "--lookback", "0s")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	execSQL(t, db, `INSERT INTO items VALUES (777777, clock_timestamp() - interval '10 seconds', 'skewed app clock')`)
	if r := hw(t, nil, exportArgs(db, s, "--lookback", "0s")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	got, _ := s.lakeRows(t, "items")
	if _, ok := got["777777"]; ok {
		t.Fatal("the skewed row was exported: update docs/guarantees.md")
	}
	// A lookback wider than the skew takes it.
	if r := hw(t, nil, exportArgs(db, s, "--lookback", "30s")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	compare(t, s, "items", db)
}
