package export_test

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

// TestEveryModifiedAtTypeAtEveryLookback: a row stamped by the database
// right after a run, in the same day or second as that run's bound, is
// exported by the next run, whatever the modified-at type and lookback.
func TestEveryModifiedAtTypeAtEveryLookback(t *testing.T) {
	for _, typ := range []string{"date", "timestamp", "timestamptz", "timestamp(0)", "timestamptz(0)"} {
		for _, lookback := range []time.Duration{0, watermark.DefaultLookback} {
			t.Run(fmt.Sprintf("%s/lookback=%s", typ, lookback), func(t *testing.T) {
				l := newLake(t, fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, updated_at %s DEFAULT now(), name text)`, typ),
					`INSERT INTO items (id, name) VALUES (1, 'before the first run')`)
				opts := l.options()
				opts.Lookback = lookback
				first := l.mustExport(opts)
				l.exec(`INSERT INTO items (id, name) VALUES (2, 'after the first run')`)
				if strings.HasSuffix(typ, "(0)") {
					// A stamp rounded to the second is read once the clock
					// has passed it: the next run's bound must lie beyond it.
					time.Sleep(1100 * time.Millisecond)
				}
				second := l.mustExport(opts)
				if got := scalar(t, l.query("SELECT string_agg(DISTINCT id::varchar, ',' ORDER BY id::varchar) FROM lake")); got != "1,2" {
					t.Fatalf("lake holds ids %s; first run [%s, %s) watermark %s, second [%s, %s) watermark %s", got,
						deref(first.Plan.Interval.From), first.Plan.Interval.To, deref(first.Commit.Watermark),
						deref(second.Plan.Interval.From), second.Plan.Interval.To, deref(second.Commit.Watermark))
				}
				// The watermark never passes a stamp that a transaction
				// starting now could still write.
				for _, c := range []*manifest.Commit{first.Commit, second.Commit} {
					q := fmt.Sprintf("SELECT (CAST('%s' AS %s) <= CAST(now() AS %[2]s))::text", *c.Watermark, typ)
					if ok := l.pgQuery(q)[0][0]; ok != "true" {
						t.Fatalf("seq %d: watermark %s lies beyond now() as %s", c.Seq, *c.Watermark, typ)
					}
				}
			})
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// TestFullRefreshTakesEveryStamp: a full refresh replaces the lake, so it
// reads every row whatever its stamp: NULL, -infinity, the future and
// infinity. Its watermark is its upper bound, not the largest stamp read.
func TestFullRefreshTakesEveryStamp(t *testing.T) {
	for _, typ := range []string{"timestamptz", "timestamp", "date"} {
		t.Run(typ, func(t *testing.T) {
			l := newLake(t, fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, updated_at %s, name text)`, typ),
				`INSERT INTO items VALUES (1, now(), 'now'), (2, NULL, 'null'), (3, '-infinity', 'minus infinity')`)
			opts := l.options()
			l.mustExport(opts)
			// Rows already in the lake move beyond any upper bound.
			l.exec(`INSERT INTO items VALUES (4, now(), 'now too')`,
				`UPDATE items SET updated_at = 'infinity', name = 'infinity' WHERE id = 1`,
				`UPDATE items SET updated_at = now() + interval '100 years', name = 'future' WHERE id = 4`,
				`INSERT INTO items VALUES (5, 'infinity', 'born infinite'), (6, now() + interval '3 days', 'born future')`)
			inc := l.mustExport(opts)
			if inc.Commit.Metrics.RowsBeyondTo != 4 {
				t.Fatalf("incremental run counted %d rows beyond to, want 4: %+v", inc.Commit.Metrics.RowsBeyondTo, inc.Commit.Metrics)
			}
			warned := strings.Join(inc.Warnings, "\n")
			if !strings.Contains(warned, "2 rows are stamped 'infinity'") || !strings.Contains(warned, "2 rows are stamped in the future") {
				t.Errorf("incremental run's warnings do not tell infinity from the future:\n%s", warned)
			}

			opts.FullRefresh = true
			res := l.mustExport(opts)
			if got, want := res.Commit.Metrics.RowsTransferred, int64(6); got != want {
				t.Fatalf("full refresh read %d rows, want %d: %+v", got, want, res.Commit.Metrics)
			}
			got := l.query("SELECT string_agg(id::varchar || '=' || name, ',' ORDER BY id) FROM lake")
			if want := "1=infinity,2=null,3=minus infinity,4=future,5=born infinite,6=born future"; scalar(t, got) != want {
				t.Fatalf("after the full refresh the lake holds %s, want %s", scalar(t, got), want)
			}
			// (A date's watermark is the bound's day, read again next run.)
			if wm := *res.Commit.Watermark; wm != cmp.Or(res.Plan.Watermark, res.Plan.Interval.To) || strings.Contains(wm, "infinity") {
				t.Fatalf("full refresh watermark %s, upper bound %s", wm, res.Plan.Interval.To)
			}
			// The next incremental run continues from the refresh's bound.
			opts.FullRefresh = false
			next := l.mustExport(opts)
			if next.Plan.Interval.From == nil || next.Commit.Metrics.RowsTransferred != 0 {
				t.Fatalf("run after the full refresh: from %s, read %d", deref(next.Plan.Interval.From), next.Commit.Metrics.RowsTransferred)
			}
		})
	}
}

// TestBlindRoleSaysSoAtEveryRun: a role without pg_read_all_stats cannot
// see other roles' open transactions, so only the lookback protects their
// rows: every run says so, and the commit records it.
func TestBlindRoleSaysSoAtEveryRun(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`,
		`DO $$ BEGIN CREATE ROLE hw_blind LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`GRANT SELECT ON items TO hw_blind`)
	l.db = strings.Replace(l.db, "postgres@", "hw_blind@", 1)
	for run := 1; run <= 2; run++ {
		res := l.mustExport(l.options())
		if !strings.Contains(strings.Join(res.Warnings, "\n"), "hw_blind lacks pg_read_all_stats") {
			t.Fatalf("run %d does not warn of the blind bound: %q", run, res.Warnings)
		}
		c := res.Commit
		if c.ToBound != "fallback_lookback" || !strings.Contains(c.ToBoundDetail, "pg_read_all_stats") ||
			!strings.Contains(strings.Join(c.Warnings, "\n"), `GRANT pg_read_all_stats TO "hw_blind"`) {
			t.Fatalf("run %d commit records bound %s (%s), warnings %q", run, c.ToBound, c.ToBoundDetail, c.Warnings)
		}
	}
}

// TestHeldBackRowsNameTheTransaction: rows stamped after a bound that an
// open transaction held back are not "future stamps": the warning names
// the transaction, and the next run takes them.
func TestHeldBackRowsNameTheTransaction(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`)
	opts := l.options()
	l.mustExport(opts)
	conn := l.connect()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	var pid int
	if err := tx.QueryRow(t.Context(), `INSERT INTO items VALUES (2, now(), 'open', 1) RETURNING pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	l.exec(`INSERT INTO items VALUES (3, clock_timestamp(), 'after the open transaction began', 1)`)
	res := l.mustExport(opts)
	if res.Commit.ToBound != "oldest_transaction" || res.Commit.Metrics.RowsBeyondTo != 1 {
		t.Fatalf("bound %s (%s), %d rows beyond to", res.Commit.ToBound, res.Commit.ToBoundDetail, res.Commit.Metrics.RowsBeyondTo)
	}
	warned := strings.Join(res.Warnings, "\n")
	if !strings.Contains(warned, fmt.Sprintf("pid %d", pid)) || strings.Contains(warned, "future") {
		t.Fatalf("the warning does not name the open transaction (pid %d):\n%s", pid, warned)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.mustExport(opts)
	if got := scalar(t, l.query("SELECT string_agg(DISTINCT id::varchar, ',' ORDER BY id::varchar) FROM lake")); got != "1,2,3" {
		t.Fatalf("lake holds %s", got)
	}
}
