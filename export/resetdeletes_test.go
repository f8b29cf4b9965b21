package export_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
)

// reset commits a reset of the lake's model.
func (l *lake) reset(req manifest.ResetRequest) *manifest.Commit {
	l.t.Helper()
	ctx := context.Background()
	d := l.openDest()
	req.Reason, req.User, req.Host = "replay", "u", "h"
	c, _, err := manifest.NewLog(d, l.model).Reset(ctx, req)
	if err != nil {
		l.t.Fatalf("reset: %v", err)
	}
	return c
}

// TestResetRereadsDeletes: after a reset, the next export reads the
// deletes of the replayed interval again as tombstones, and after dedupe
// the lake equals the source, for each kind of modified-at column. A reset
// commit was made by no run, so the date column's checks start at the new
// watermark's midnight.
func TestResetRereadsDeletes(t *testing.T) {
	for _, mod := range []string{"timestamptz", "timestamp", "date"} {
		t.Run(mod, func(t *testing.T) {
			l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at `+mod+` NOT NULL DEFAULT now(), name text)`,
				`INSERT INTO items SELECT g, now(), 'n' || g FROM generate_series(1, 60) g`)
			l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
			if mod == "date" {
				// A log installed before the day the reset goes back to.
				l.exec(`UPDATE highwater.delete_log_tables SET installed_at = now() - interval '3 days'`)
			}
			opts := l.deleteLogOptions()
			first := l.mustExport(opts).Commit
			l.exec(`DELETE FROM items WHERE id % 10 = 1`)
			if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 6 {
				t.Fatalf("wrote %d tombstones, want 6", got)
			}
			l.exec(`DELETE FROM items WHERE id % 10 = 2`, `UPDATE items SET name = name || '+', updated_at = now() WHERE id % 10 = 3`)
			// A date column's run reads its watermark's day again, deletes
			// included.
			want := int64(6)
			if mod == "date" {
				want = 12
			}
			if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != want {
				t.Fatalf("wrote %d tombstones, want %d", got, want)
			}
			req := manifest.ResetRequest{ToSeq: first.Seq}
			if mod == "date" {
				req = manifest.ResetRequest{Watermark: l.pgQuery(`SELECT (current_date - 1)::text`)[0][0]}
			}
			l.reset(req)
			l.exec(`DELETE FROM items WHERE id % 10 = 4`)
			res := l.mustExport(opts)
			if got := res.Commit.Metrics.DeletesTransferred; got != 18 {
				t.Fatalf("the export after the reset wrote %d tombstones, want the 12 of the replayed interval and 6 new", got)
			}
			l.dedupe()
			if got, want := l.liveRows(), l.sourceRows("true"); !slices.Equal(got, want) {
				t.Fatalf("after dedupe the lake's live rows are\n%v\nthe source's\n%v", got, want)
			}
		})
	}
}

// TestResetPastThePrunedLog: a reset whose new watermark minus the
// lookback lies before the log's pruning horizon cannot re-read the
// replayed interval's deletes; the next export stops with one line and
// commits nothing, and a full refresh rebuilds the baseline.
func TestResetPastThePrunedLog(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 30) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	opts := l.deleteLogOptions()
	first := l.mustExport(opts).Commit
	l.exec(`DELETE FROM items WHERE id <= 5`)
	l.mustExport(opts)
	l.pruneDeleteLog()
	l.reset(manifest.ResetRequest{ToSeq: first.Seq})
	seq := l.state().Seq
	line := regexp.MustCompile(`^the delete log of public\.items was pruned up to [0-9-]+ [0-9:.]+\+00, past this run's lower bound [0-9-]+ [0-9:.]+\+00; run --full-refresh to rebuild the baseline$`)
	if _, err := l.export(opts); !errors.Is(err, pgsource.ErrDeleteLogGap) || !line.MatchString(err.Error()) {
		t.Fatalf("want the retention line, got %v", err)
	}
	if st := l.state(); st.Seq != seq {
		t.Fatalf("the stopped run committed seq %d", st.Seq)
	}
	full := opts
	full.FullRefresh = true
	l.mustExport(full)
	l.dedupe()
	if got, want := l.liveRows(), l.sourceRows("true"); !slices.Equal(got, want) {
		t.Fatalf("live rows %v, want %v", got, want)
	}
}

// TestResetBeforeTheLogsInstall: a reset to before the log's install, or
// before a TRUNCATE that a full refresh already rebuilt after, replays an
// interval the lake holds no row of that the log missed: the install and
// TRUNCATE checks start where the lake stood before the reset, so the
// replay runs, and only the horizon is checked against its lower bound.
func TestResetBeforeTheLogsInstall(t *testing.T) {
	for _, tc := range []string{"install", "truncate"} {
		t.Run(tc, func(t *testing.T) {
			l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now() - interval '1 hour', 'n' || g, g FROM generate_series(1, 30) g`)
			before := l.pgQuery(`SELECT (now() - interval '10 minutes')::text`)[0][0]
			l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
			opts := l.deleteLogOptions()
			l.mustExport(opts)
			if tc == "truncate" {
				// The log's install long before: only the TRUNCATE is after the reset's watermark.
				l.exec(`UPDATE highwater.delete_log_tables SET installed_at = now() - interval '1 day'`)
				l.exec(`TRUNCATE items`, `INSERT INTO items SELECT g, now() - interval '1 hour', 'again' || g, g FROM generate_series(1, 30) g`)
				full := opts
				full.FullRefresh = true
				l.mustExport(full)
			}
			l.exec(`DELETE FROM items WHERE id <= 5`)
			l.mustExport(opts)
			l.reset(manifest.ResetRequest{Watermark: before})
			l.exec(`DELETE FROM items WHERE id = 6`)
			if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 6 {
				t.Fatalf("the replay wrote %d tombstones, want 6", got)
			}
			l.dedupe()
			if got, want := l.liveRows(), l.sourceRows("true"); !slices.Equal(got, want) {
				t.Fatalf("live rows %v, want %v", got, want)
			}
		})
	}
}

// TestResetThenTruncate: the checks that start where the lake stood before
// a chain of resets still stop the replay at a TRUNCATE made after it.
func TestResetThenTruncate(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now() - interval '1 hour', 'n' || g, g FROM generate_series(1, 30) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	opts := l.deleteLogOptions()
	first := l.mustExport(opts).Commit
	l.exec(`DELETE FROM items WHERE id <= 5`)
	l.mustExport(opts)
	l.reset(manifest.ResetRequest{ToSeq: first.Seq})
	l.reset(manifest.ResetRequest{Watermark: l.pgQuery(`SELECT (now() - interval '30 minutes')::text`)[0][0]})
	l.exec(`TRUNCATE items`)
	seq := l.state().Seq
	line := regexp.MustCompile(`^the delete log of public\.items records a TRUNCATE at [0-9-]+ [0-9:.]+\+00, after the watermark [0-9-]+ [0-9:.]+\+00, which left no entry per row; run --full-refresh to rebuild the baseline$`)
	if _, err := l.export(opts); !errors.Is(err, pgsource.ErrDeleteLogGap) || !line.MatchString(err.Error()) {
		t.Fatalf("want the TRUNCATE line, got %v", err)
	}
	if st := l.state(); st.Seq != seq {
		t.Fatalf("the stopped run committed seq %d", st.Seq)
	}
}
