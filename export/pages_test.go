package export_test

import (
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

// TestResumedPagesAfterTombstones: a run killed after a checkpoint of its
// delete log phase and resumed counts each page statement once: those of
// the killed attempt that its checkpointed files hold, and the resumed
// attempt's. Its pages are an uninterrupted twin's, plus the row pages the
// resumed attempt ran again (it restarts the row phase after the rows'
// last cursor), when the pages end where the files do: 256 entries a page,
// 1024 a batch, one batch a file.
func TestResumedPagesAfterTombstones(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 4000) g`)
	l.installDeleteLog(pgsource.InstallSpec{Table: "public.items"})
	twin := &lake{t: t, db: l.db, dir: t.TempDir(), model: l.model}
	opts := l.deleteLogOptions()
	opts.PageRows, opts.TargetFileBytes = 256, 1
	l.mustExport(opts)
	twin.mustExport(opts)
	l.exec(`DELETE FROM items WHERE id <= 3172`) // 12 full pages and one of 100

	want := twin.mustExport(opts).Commit.Metrics.Pages
	l.exportCrashing(opts, "tombstone-after-checkpoint", 2)
	rerun := opts
	rerun.Failpoint = func(name string) {
		if name == "after-page" {
			want++
		}
	}
	res := l.mustExport(rerun)
	if !res.Resumed {
		t.Fatal("the second attempt did not resume the killed run")
	}
	if got := res.Commit.Metrics.DeletesTransferred; got != 3172 {
		t.Fatalf("the resumed run wrote %d tombstones, want 3172", got)
	}
	if got := res.Commit.Metrics.Pages; got != want {
		t.Fatalf("the resumed run counts %d pages, want %d", got, want)
	}
}

// TestResumedPagesAfterRowCheckpoint: a run killed after the checkpoint of
// its first file and resumed commits the metrics, pages included, of an
// uninterrupted twin, when the pages end where the first file does: a
// batch of 1024 rows a file, and pages of 342 rows, whose later ones start
// at the last row of the one before (342 + 2*341 = 1024). The checkpoint
// carries the pages read for the rows its file holds; the resumed attempt
// counts only the pages it runs after them.
func TestResumedPagesAfterRowCheckpoint(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second', 'n' || g, g FROM generate_series(1, 4000) g`)
	twin := &lake{t: t, db: l.db, dir: t.TempDir(), model: l.model}
	opts := l.options()
	opts.PageRows, opts.TargetFileBytes = 342, 1

	want := twin.mustExport(opts).Commit.Metrics
	if want.Files < 3 || want.Pages < 2*want.Files {
		t.Fatalf("the twin wrote %d files of %d pages, want several files of several pages", want.Files, want.Pages)
	}
	l.exportCrashing(opts, "after-checkpoint", 1)
	res := l.mustExport(opts)
	if !res.Resumed {
		t.Fatal("the second attempt did not resume the killed run")
	}
	if got := res.Commit.Metrics; *got != *want {
		t.Fatalf("the resumed run commits %+v, the uninterrupted one %+v", got, want)
	}
}
