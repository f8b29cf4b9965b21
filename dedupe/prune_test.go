package dedupe_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/vacuum"
)

// TestVacuumPrunesAbandonedRuns: the metadata of a run declared abandoned
// goes once the declaration is older than the retention, not before; an
// unfinished run within the retention keeps its plan.
func TestVacuumPrunesAbandonedRuns(t *testing.T) {
	ctx := context.Background()
	d := openDest(t, "file://"+t.TempDir())
	s := newSource(t, d)
	s.exec(`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, g / 100.0 FROM generate_series(1, 300) g`)
	s.export()
	s.cycle(1)
	s.export()
	crash := func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			dedupe.Run(ctx, d, d.ObjectURL, dedupe.Options{Model: "items", Failpoint: func(name string) {
				if name == "dedupe-before-commit" {
					runtime.Goexit()
				}
			}})
		}()
		<-done
	}
	crash()
	log := manifest.NewLog(d, "items")
	runs, _ := log.ListRuns(ctx)
	crashed := runs[len(runs)-1]
	runDedupe(t, d, dedupe.Options{Model: "items"})
	at := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	if _, err := vacuum.Run(ctx, d, vacuum.Options{Model: "items", OlderThan: time.Minute, Now: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, dead := readState(t, d, "items").Abandoned[crashed]; !dead {
		t.Fatal("the crashed run was not declared abandoned")
	}
	// The declaration is younger than the retention: the plan stays.
	if runs, _ := log.ListRuns(ctx); !contains(runs, crashed) {
		t.Fatalf("the abandoned run's plan went with its declaration: %v", runs)
	}
	s.cycle(2)
	s.export()
	crash() // a new unfinished run, within the retention
	runs, _ = log.ListRuns(ctx)
	unfinished := runs[len(runs)-1]
	if _, done := readState(t, d, "items").Runs[unfinished]; done || unfinished == crashed {
		t.Fatal("no unfinished run: the test proves nothing")
	}
	res, err := vacuum.Run(ctx, d, vacuum.Options{Model: "items", OlderThan: time.Hour, Now: at(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	runs, _ = log.ListRuns(ctx)
	st := readState(t, d, "items")
	if contains(runs, crashed) || !contains(runs, unfinished) || len(res.Pruned) == 0 {
		t.Fatalf("runs left %v (crashed %s, unfinished %s), pruned %v", runs, crashed, unfinished, res.Pruned)
	}
	for _, id := range runs {
		if seq, done := st.Runs[id]; done && seq != st.LastWatermarkSeq {
			t.Fatalf("committed run %s (seq %d) kept", id, seq)
		}
	}
	runDedupe(t, d, dedupe.Options{Model: "items"}) // reads the last export's lookback
	s.assertExact()
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
