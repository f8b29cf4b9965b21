package faults_test

import (
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// failpoints are the points the loop kills the binary at; the per-file
// ones are hit once per file, so they are also tried at the second hit.
var failpoints = []struct {
	name    string
	perFile bool
}{
	{"after-plan", false},
	{"after-upload", true},
	{"after-checkpoint", true},
	{"before-commit", false},
	{"commit-response-lost", false},
	{"after-commit", false},
	{"before-symlink", false},
}

// small settings make a run of 4000 rows write at least 3 files.
var smallFiles = []string{"--target-file-size", "32KiB", "--row-group-size", "16KiB", "--page-rows", "500", "--lookback", "1s"}

func TestFailpointsFile(t *testing.T) { failpointLoop(t, fileStore) }

func TestFailpointsS3(t *testing.T) { failpointLoop(t, s3Store) }

// failpointLoop kills an export at every failpoint, changes the source,
// reruns until success and compares the lake with the source.
func failpointLoop(t *testing.T, newStore func(*testing.T) store) {
	for _, fp := range failpoints {
		hits := []int{1}
		if fp.perFile {
			hits = []int{1, 2}
		}
		for _, n := range hits {
			t.Run(fmt.Sprintf("%s:%d", fp.name, n), func(t *testing.T) {
				s := newStore(t)
				db := itemsSetup(t, 4000)
				// A first committed run, so the killed one is incremental
				// for the points after the first commit too.
				if fp.name != "after-plan" {
					if r := hw(t, nil, exportArgs(db, s, smallFiles...)...); r.code != 0 {
						t.Fatalf("first export: %s", r.stderr)
					}
					churn(t, db, 1)
					bulkTouch(t, db)
				}
				r := hw(t, []string{fmt.Sprintf("HIGHWATER_FAILPOINT=%s:%d", fp.name, n)}, exportArgs(db, s, smallFiles...)...)
				if !r.killed {
					t.Fatalf("failpoint %s:%d: the process was not killed (exit %d): %s", fp.name, n, r.code, r.stderr)
				}
				pointsTried.Add(1)
				faultsInjected.Add(1)
				storesTried[s.name] = true
				orphans := uncheckpointed(t, s)
				churn(t, db, 2)
				// Rerun until success: the first rerun resumes the killed
				// run (whose bound predates the churn), the next picks up
				// the churn.
				for i := 0; i < 2; i++ {
					if r := hw(t, nil, exportArgs(db, s, smallFiles...)...); r.code != 0 {
						t.Fatalf("rerun %d: exit %d: %s", i, r.code, r.stderr)
					}
				}
				compare(t, s, "items", db)
				checkCommittedSet(t, s, orphans)
				if r := hw(t, nil, "verify", "--dest", s.url, "--model", "items"); r.code != 0 {
					t.Fatalf("verify after recovery: %s%s", r.stdout, r.stderr)
				}
			})
		}
	}
}

// bulkTouch restamps a range of rows so that the killed run has
// several files' worth of changes to write.
func bulkTouch(t *testing.T, db string) {
	t.Helper()
	execSQL(t, db, `UPDATE items SET updated_at = clock_timestamp(), payload = md5(payload) || md5(id::text) || md5(payload || 'x') WHERE id <= 3500`)
}

// uncheckpointed lists the data files that no checkpoint chain and no
// commit names: what the killed attempt left behind.
func uncheckpointed(t *testing.T, s store) map[string]bool {
	t.Helper()
	d := s.open(t)
	log := manifest.NewLog(d, "items")
	named := map[string]bool{}
	st := s.state(t, "items")
	for _, f := range st.Files {
		named[f.Key] = true
	}
	runs, err := log.ListRuns(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range runs {
		chain, err := log.ReadChain(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ck := range chain {
			named[ck.File.Key] = true
		}
	}
	out := map[string]bool{}
	err = d.List(t.Context(), log.Key("data")+"/", func(a objstore.Attrs) error {
		k := strings.TrimPrefix(a.Key, "items/")
		if !named[k] {
			out[k] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCommittedSet checks that every committed file belongs to a
// committed run and that no orphan of the killed attempt was committed.
func checkCommittedSet(t *testing.T, s store, orphans map[string]bool) {
	t.Helper()
	st := s.state(t, "items")
	for _, f := range st.Files {
		run := path.Base(path.Dir(path.Dir(f.Key)))
		if _, ok := st.Runs[run]; !ok {
			t.Errorf("committed file %s belongs to run %s, which never committed", f.Key, run)
		}
		if orphans[f.Key] {
			t.Errorf("committed file %s was an orphan of the killed attempt", f.Key)
		}
	}
	r := hw(t, nil, "files", "--dest", s.url, "--model", "items")
	if r.code != 0 {
		t.Fatalf("files: %s", r.stderr)
	}
	if got := len(strings.Fields(r.stdout)); got != len(st.Files) {
		t.Errorf("files lists %d files, the state %d", got, len(st.Files))
	}
}
