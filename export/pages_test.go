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
