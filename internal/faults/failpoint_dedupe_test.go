package faults_test

import (
	"fmt"
	"testing"
)

// compactionPoints are the points inside dedupe and vacuum where the loop
// kills the binary, with the command that reaches them.
var compactionPoints = []struct {
	name string
	args func(s store) []string
}{
	{"dedupe-before-commit", dedupeArgs},
	{"dedupe-after-commit", dedupeArgs},
	{"vacuum-after-commit", vacuumArgs},
	{"vacuum-mid-delete", vacuumArgs},
}

func dedupeArgs(s store) []string {
	return []string{"dedupe", "--dest", s.url, "--model", "items", "--target-file-size", "32KiB"}
}

func vacuumArgs(s store) []string {
	return []string{"vacuum", "--dest", s.url, "--model", "items", "--older-than", "1ns"}
}

func TestCompactionFailpointsFile(t *testing.T) { compactionLoop(t, fileStore) }

func TestCompactionFailpointsS3(t *testing.T) { compactionLoop(t, s3Store) }

// compactionLoop kills a dedupe or a vacuum at each of its points, then
// reruns it and checks that the lake still equals the source with exactly
// one row per key, and that every committed file is intact.
func compactionLoop(t *testing.T, newStore func(*testing.T) store) {
	for _, fp := range compactionPoints {
		t.Run(fp.name, func(t *testing.T) {
			s := newStore(t)
			db := itemsSetup(t, 4000)
			for round := 1; round <= 2; round++ {
				if r := hw(t, nil, exportArgs(db, s, smallFiles...)...); r.code != 0 {
					t.Fatalf("export: %s", r.stderr)
				}
				churn(t, db, round)
			}
			if r := hw(t, nil, exportArgs(db, s, smallFiles...)...); r.code != 0 {
				t.Fatalf("export: %s", r.stderr)
			}
			if fp.name[:6] == "vacuum" {
				// Give the vacuum an attempt to declare abandoned (an export
				// killed after an upload, then resumed by a new attempt) and
				// removed files to delete (a dedupe).
				churn(t, db, 3)
				bulkTouch(t, db)
				if r := hw(t, []string{"HIGHWATER_FAILPOINT=after-upload"}, exportArgs(db, s, smallFiles...)...); !r.killed {
					t.Fatalf("export was not killed: %s", r.stderr)
				}
				for _, args := range [][]string{exportArgs(db, s, smallFiles...), dedupeArgs(s)} {
					if r := hw(t, nil, args...); r.code != 0 {
						t.Fatalf("%s: %s", args[0], r.stderr)
					}
				}
			}
			r := hw(t, []string{fmt.Sprintf("HIGHWATER_FAILPOINT=%s", fp.name)}, fp.args(s)...)
			if !r.killed {
				t.Fatalf("failpoint %s: the process was not killed (exit %d): %s", fp.name, r.code, r.stderr)
			}
			pointsTried.Add(1)
			faultsInjected.Add(1)
			storesTried[s.name] = true
			for _, args := range [][]string{fp.args(s), dedupeArgs(s)} {
				if r := hw(t, nil, args...); r.code != 0 {
					t.Fatalf("%s after the crash: exit %d: %s", args[0], r.code, r.stderr)
				}
			}
			if r := hw(t, nil, "verify", "--dest", s.url, "--model", "items"); r.code != 0 {
				t.Fatalf("verify after recovery: %s%s", r.stdout, r.stderr)
			}
			compare(t, s, "items", db)
			if keys, total := s.lakeRows(t, "items"); total != len(keys) {
				t.Fatalf("after dedupe the lake holds %d rows for %d keys", total, len(keys))
			}
		})
	}
}
