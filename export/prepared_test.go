package export_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPreparedTransactionRowsArriveLate: a prepared transaction stamps its
// rows at its start, before its PREPARE, and nothing records that start.
// A run while it is prepared reads up to the PREPARE time at most; the
// rows it stamped earlier become visible at COMMIT PREPARED and must still
// be read by a later run, at lookback 0.
func TestPreparedTransactionRowsArriveLate(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`)
	opts := l.options()
	l.mustExport(opts)
	l.exec(`BEGIN; INSERT INTO items VALUES (2, now(), 'prepared', 1); SELECT pg_sleep(0.05); PREPARE TRANSACTION 'hw_prepared_late'`)
	t.Cleanup(func() {
		// Left prepared by a failed test, it would hold every later bound.
		if conn, err := pgx.Connect(context.Background(), l.db); err == nil {
			conn.Exec(context.Background(), `ROLLBACK PREPARED 'hw_prepared_late'`)
			conn.Close(context.Background())
		}
	})
	time.Sleep(50 * time.Millisecond)
	l.exec(`INSERT INTO items VALUES (3, clock_timestamp(), 'committed after the prepare', 1)`)
	l.mustExport(opts)
	l.mustExport(opts) // a second run while it is prepared
	l.exec(`COMMIT PREPARED 'hw_prepared_late'`)
	l.mustExport(opts)
	if got := scalar(t, l.query("SELECT string_agg(DISTINCT id::varchar, ',' ORDER BY id::varchar) FROM lake")); got != "1,2,3" {
		t.Fatalf("lake holds %s, want 1,2,3", got)
	}
}
