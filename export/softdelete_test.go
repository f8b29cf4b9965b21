package export_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/pgsource"
)

// dedupe compacts the lake by dedupe's rule, dropping the tombstones that
// no older version can follow any more.
func (l *lake) dedupe() *dedupe.Result {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := l.openDest()
	res, err := dedupe.Run(ctx, d, d.ObjectURL, dedupe.Options{Model: l.model, TempDir: l.t.TempDir()})
	if err != nil {
		l.t.Fatalf("dedupe: %v", err)
	}
	return res
}

// liveRows are the lake's rows that are not tombstones, as "id name"
// lines in key order; after a dedupe there is one per live key.
func (l *lake) liveRows() []string {
	l.t.Helper()
	var out []string
	for _, r := range l.query(`SELECT id::text || ' ' || coalesce(name, '-') FROM lake WHERE NOT _hw_deleted ORDER BY id`) {
		out = append(out, r[0])
	}
	return out
}

func (l *lake) sourceRows(where string) []string {
	l.t.Helper()
	var out []string
	for _, r := range l.pgQuery(`SELECT id::text || ' ' || coalesce(name, '-') FROM items WHERE ` + where + ` ORDER BY id`) {
		out = append(out, r[0])
	}
	return out
}

func TestSoftDelete(t *testing.T) {
	for _, tc := range []struct {
		name, column, typ, del, undel, live string
	}{
		{"timestamptz", "deleted_at", "timestamptz", "now()", "NULL", "deleted_at IS NULL"},
		{"boolean", "is_deleted", "boolean", "true", "false", "is_deleted IS NOT TRUE"},
		{"boolean NULL is live", "is_deleted", "boolean", "true", "NULL", "is_deleted IS NOT TRUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLake(t, fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, %s %s)`, tc.column, tc.typ),
				`INSERT INTO items SELECT g, now(), 'n' || g FROM generate_series(1, 200) g`)
			if tc.typ == "boolean" {
				l.exec(`UPDATE items SET is_deleted = false WHERE id % 2 = 0`) // false and NULL are both live
			}
			opts := l.options()
			opts.Source.SoftDelete = tc.column
			if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 0 {
				t.Fatalf("first export wrote %d tombstones, want 0", got)
			}
			l.exec(fmt.Sprintf(`UPDATE items SET %s = %s, updated_at = clock_timestamp() WHERE id %% 10 = 3`, tc.column, tc.del),
				`UPDATE items SET name = name || '+', updated_at = clock_timestamp() WHERE id % 7 = 0`)
			c := l.mustExport(opts).Commit
			if got := c.Metrics.DeletesTransferred; got != 20 {
				t.Fatalf("second export wrote %d tombstones, want 20", got)
			}
			// A row soft-deleted again is one more tombstone, and an update
			// of an already deleted row keeps it deleted.
			l.exec(fmt.Sprintf(`UPDATE items SET %s = %s, updated_at = clock_timestamp() WHERE id %% 10 = 5`, tc.column, tc.del),
				`UPDATE items SET name = name || '!', updated_at = clock_timestamp() WHERE id % 10 = 3 AND id < 50`)
			l.mustExport(opts)
			l.dedupe()
			want := l.sourceRows(tc.live)
			if got := l.liveRows(); !slices.Equal(got, want) {
				t.Fatalf("after dedupe the lake's live rows are\n%v\nthe source's undeleted rows\n%v", got, want)
			}
			if len(want) != 160 {
				t.Fatalf("the source has %d undeleted rows, want 160", len(want))
			}
			// Undeleting brings the row back, with its values as they are now.
			l.exec(fmt.Sprintf(`UPDATE items SET %s = %s, name = 'back', updated_at = clock_timestamp() WHERE id IN (3, 15, 113)`, tc.column, tc.undel))
			l.mustExport(opts)
			l.dedupe()
			want = l.sourceRows(tc.live)
			if got := l.liveRows(); !slices.Equal(got, want) {
				t.Fatalf("after undeleting, the lake's live rows are\n%v\nthe source's undeleted rows\n%v", got, want)
			}
			if !slices.Contains(want, "113 back") {
				t.Fatalf("the undeleted row 113 is not live in the source: %v", want)
			}
		})
	}
}

// TestSoftDeleteFullRefresh: a full refresh writes soft-deleted rows as
// tombstones too, so that a dedupe leaves them out.
func TestSoftDeleteFullRefresh(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, gone_on date)`,
		`INSERT INTO items SELECT g, now(), 'n' || g, CASE WHEN g % 4 = 0 THEN current_date END FROM generate_series(1, 100) g`)
	opts := l.options()
	opts.Source.SoftDelete = "gone_on"
	opts.FullRefresh = true
	if got := l.mustExport(opts).Commit.Metrics.DeletesTransferred; got != 25 {
		t.Fatalf("full refresh wrote %d tombstones, want 25", got)
	}
	if got := scalar(t, l.query(`SELECT count(*) FROM lake WHERE _hw_deleted AND name IS NOT NULL`)); got != "25" {
		t.Fatalf("%s soft-deleted rows keep their columns as read, want 25", got)
	}
	l.dedupe()
	if got, want := l.liveRows(), l.sourceRows("gone_on IS NULL"); !slices.Equal(got, want) {
		t.Fatalf("live rows %v, want %v", got, want)
	}
}

// TestSoftDeleteIdentity: the soft-delete column is part of the model's
// identity, so turning it on, off or to another column asks for a full
// refresh; a bad column names the columns and commits nothing.
func TestSoftDeleteIdentity(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, deleted_at timestamptz, archived boolean)`,
		`INSERT INTO items SELECT g, now(), 'n' || g FROM generate_series(1, 10) g`)
	opts := l.options()
	opts.Source.SoftDelete = "delted_at"
	_, err := l.export(opts)
	if !errors.Is(err, pgsource.ErrBadModel) || !strings.Contains(err.Error(), "columns are: id, updated_at, name, deleted_at, archived") {
		t.Fatalf("want a bad model error listing the columns, got %v", err)
	}
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("a bad soft-delete column committed seq %d", st.Seq)
	}
	opts.Source.SoftDelete = ""
	l.mustExport(opts)
	for _, col := range []string{"deleted_at", "archived"} {
		opts.Source.SoftDelete = col
		_, err = l.export(opts)
		if !errors.Is(err, export.ErrIdentity) || !strings.Contains(err.Error(), "soft-delete column") || !strings.Contains(err.Error(), "--full-refresh") {
			t.Fatalf("soft delete %s on a model exported without: want ErrIdentity naming it and asking for --full-refresh, got %v", col, err)
		}
		opts.FullRefresh = true
		if c := l.mustExport(opts).Commit; !c.AdoptsIdentity || c.Identity.SoftDelete != col {
			t.Fatalf("the full refresh's commit does not adopt soft delete %s: %+v", col, c.Identity)
		}
		opts.FullRefresh = false
		l.mustExport(opts)
	}
	opts.Source.SoftDelete = ""
	if _, err := l.export(opts); !errors.Is(err, export.ErrIdentity) {
		t.Fatalf("turning the soft-delete column off: want ErrIdentity, got %v", err)
	}
}
