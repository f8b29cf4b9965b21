package faults_test

import (
	"strings"
	"sync"
	"testing"
)

// TestRacingExports starts two exports of one model together, 20 times:
// each seq is committed exactly once, and a loser exits non-zero saying
// another export committed first, with nothing of it in the committed set.
func TestRacingExports(t *testing.T) {
	db := itemsSetup(t, 2000)
	s := fileStore(t)
	losses := 0
	for i := 0; i < 20; i++ {
		churn(t, db, i)
		var wg sync.WaitGroup
		res := make([]result, 2)
		for j := range res {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[j] = hw(t, nil, exportArgs(db, s, "--lookback", "1s")...)
			}()
		}
		wg.Wait()
		wins := 0
		for _, r := range res {
			switch {
			case r.code == 0:
				wins++
			// A process that started a moment later resumes the run the
			// other just planned (it looks unfinished), and the two then
			// race on its checkpoint chain instead of on the log.
			case strings.Contains(r.lastLine(), "another export committed first"),
				strings.Contains(r.lastLine(), "another attempt of this run extended its checkpoint chain first"):
				losses++
				faultsInjected.Add(1)
			default:
				t.Fatalf("round %d: exit %d without a clear reason: %s", i, r.code, r.lastLine())
			}
		}
		if wins == 0 {
			t.Fatalf("round %d: both exports failed", i)
		}
	}
	st := s.state(t, "items")
	seen := map[string]bool{}
	for _, f := range st.Files {
		seen[f.Key] = true
	}
	// Every run id committed once, at one seq; and the commits count
	// equals the winners.
	runs := map[int64]string{}
	for id, seq := range st.Runs {
		if other, dup := runs[seq]; dup {
			t.Fatalf("seq %d holds runs %s and %s", seq, other, id)
		}
		runs[seq] = id
	}
	if int64(len(runs)) != st.Seq {
		t.Fatalf("%d runs for %d commits", len(runs), st.Seq)
	}
	checkCommittedSet(t, s, nil)
	compare(t, s, "items", db)
	if r := hw(t, nil, "verify", "--dest", s.url, "--model", "items"); r.code != 0 {
		t.Fatalf("verify: %s%s", r.stdout, r.lastLine())
	}
	t.Logf("20 rounds of two racing exports: %d commits, %d losers exited cleanly", st.Seq, losses)
}
