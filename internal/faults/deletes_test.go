package faults_test

import (
	"testing"

	"github.com/highwater-dev/highwater/manifest"
)

// tombstonePoints are the points inside the delete log phase of an export
// where the loop kills the binary; the per-file ones are tried at the
// first and the second tombstone file.
var tombstonePoints = []string{
	"after-tombstone-page:2",
	"tombstone-after-upload:1", "tombstone-after-upload:2",
	"tombstone-after-checkpoint:1", "tombstone-after-checkpoint:2",
	"before-commit",
}

// TestTombstoneFailpointsFile kills an export with --delete-log while it
// writes tombstones, then reruns it: the lake after a dedupe equals the
// source, and the commits count every delete exactly once.
func TestTombstoneFailpointsFile(t *testing.T) {
	tiny := []string{"--delete-log", "--target-file-size", "1KiB", "--row-group-size", "1KiB", "--page-rows", "300", "--lookback", "1s"}
	for _, fp := range tombstonePoints {
		t.Run(fp, func(t *testing.T) {
			s := fileStore(t)
			db := itemsSetup(t, 30000)
			if r := hw(t, nil, "deletes", "install", "--source", db, "--table", "public.items"); r.code != 0 {
				t.Fatalf("install: %s", r.stderr)
			}
			if r := hw(t, nil, exportArgs(db, s, "--delete-log", "--lookback", "1s")...); r.code != 0 {
				t.Fatalf("first export: %s", r.stderr)
			}
			churn(t, db, 1)
			execSQL(t, db, `DELETE FROM items WHERE id % 3 <> 1`) // 20000: tombstones compress well, and a file's bytes reach the store in steps
			r := hw(t, []string{"HIGHWATER_FAILPOINT=" + fp}, exportArgs(db, s, tiny...)...)
			if !r.killed {
				t.Fatalf("failpoint %s: the process was not killed (exit %d): %s", fp, r.code, r.stderr)
			}
			pointsTried.Add(1)
			faultsInjected.Add(1)
			orphans := uncheckpointed(t, s)
			churn(t, db, 2)
			execSQL(t, db, `DELETE FROM items WHERE id % 7 = 0`)
			for i := range 2 {
				if r := hw(t, nil, exportArgs(db, s, tiny...)...); r.code != 0 {
					t.Fatalf("rerun %d: exit %d: %s", i, r.code, r.stderr)
				}
			}
			checkCommittedSet(t, s, orphans)
			if r := hw(t, nil, "verify", "--dest", s.url, "--model", "items"); r.code != 0 {
				t.Fatalf("verify after recovery: %s%s", r.stdout, r.stderr)
			}
			compare(t, s, "items", db)
			// The resumed run, the first to commit after the kill, counts
			// each key deleted before its plan exactly once: it neither
			// loses nor repeats the tombstones of the killed attempt. (A
			// later run re-reads its lookback, as it does rows.)
			c, err := manifest.NewLog(s.open(t), "items").ReadCommit(t.Context(), 2)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.Metrics.DeletesTransferred, int64(20000); got != want {
				t.Fatalf("the resumed run counts %d tombstones, want %d", got, want)
			}
			if r := hw(t, nil, dedupeArgs(s)...); r.code != 0 {
				t.Fatalf("dedupe: %s", r.stderr)
			}
			compare(t, s, "items", db)
		})
	}
}
