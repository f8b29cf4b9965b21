package export_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestUntrackedSessionMakesTheBoundBlind: a session with track_activities
// off (a superuser may set it per session, and it may be off server-wide)
// reports no xact_start, so its open transaction is invisible to the bound
// even for a privileged role. Its rows are then protected by the lookback
// alone: every run must say so and record a blind bound, not "clock".
func TestUntrackedSessionMakesTheBoundBlind(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`)
	opts := l.options()
	l.mustExport(opts)
	conn := l.connect()
	if _, err := conn.Exec(t.Context(), `SET track_activities = off`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	var pid int
	if err := tx.QueryRow(t.Context(), `INSERT INTO items VALUES (2, now(), 'open, untracked', 1) RETURNING pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	l.exec(`INSERT INTO items VALUES (3, clock_timestamp(), 'after the open transaction began', 1)`)
	for run := 1; run <= 2; run++ {
		res := l.mustExport(opts)
		c := res.Commit
		if c.ToBound != "fallback_lookback" || !strings.Contains(c.ToBoundDetail, fmt.Sprintf("pid %d", pid)) ||
			!strings.Contains(strings.Join(res.Warnings, "\n"), "track_activities") {
			t.Fatalf("run %d: an untracked session's open transaction is invisible, yet the bound is %s (%s), warnings %q",
				run, c.ToBound, c.ToBoundDetail, res.Warnings)
		}
	}
}
