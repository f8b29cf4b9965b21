package vacuum

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore/mem"
	"github.com/highwater-dev/highwater/manifest"
)

// TestVacuumForgetsPrunedRuns: the state's Runs holds every committed run
// until a vacuum has deleted the run's plan and checkpoints; then the run
// leaves it, so that the state does not grow with every run. What it kept
// them for still holds: an attempt of a forgotten run, a backfill's too
// (whose own commit kills no backfill), can never commit; the newest
// export keeps its plan and entry; a later vacuum still finds the stray
// attempts of a forgotten run; and every state checkpoint agrees with the
// fold of the log.
func TestVacuumForgetsPrunedRuns(t *testing.T) {
	ctx := context.Background()
	l := &lake{t: t, b: mem.New()}
	l.log = manifest.NewLog(l.b, "m")
	l.log.CheckpointEvery = 4
	sum := sha256.Sum256([]byte("x")) // what lake.object writes
	x := hex.EncodeToString(sum[:])
	later := func() time.Time { return time.Now().Add(time.Hour) }
	var twins []*manifest.Plan // in-memory plans of attempts still hung
	newest := ""
	for round := range 3 {
		for i := range 5 {
			id := fmt.Sprintf("r%d-%d", round, i)
			kind := manifest.KindExport
			if i == 2 {
				kind = manifest.KindBackfill
			}
			key := l.plan(id, kind)
			p, err := l.log.ReadPlan(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			twins = append(twins, p)
			l.commit(&manifest.Commit{Kind: kind, RunID: id, Added: []manifest.File{{Key: key, Bytes: 1, SHA256: x}}})
			if kind == manifest.KindExport {
				newest = id
			}
		}
		if _, err := Run(ctx, l.b, Options{Model: "m", OlderThan: time.Minute, Now: later}); err != nil {
			t.Fatalf("vacuum: %v", err)
		}
		st, err := l.log.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Collect(maps.Keys(st.Runs)); !slices.Equal(got, []string{newest}) {
			t.Fatalf("round %d: the state knows the runs %q, want only the newest export's %q", round, got, newest)
		}
		if _, err := l.log.ReadPlan(ctx, newest); err != nil {
			t.Fatalf("the newest export's plan: %v", err)
		}
		for _, p := range twins {
			if err := l.log.Live(ctx, st, p); !errors.Is(err, manifest.ErrCommitted) && !errors.Is(err, manifest.ErrSuperseded) {
				t.Fatalf("an attempt of the committed %s run %s is live after the vacuum: %v", p.Kind, p.RunID, err)
			}
		}
	}

	// A stray attempt of a forgotten run is still found and deleted.
	stray := manifest.DataKey("r0-1", "late", 1)
	l.object(stray)
	res, err := Run(ctx, l.b, Options{Model: "m", OlderThan: time.Minute, Now: later})
	if err != nil || !slices.Equal(res.Declared, []string{"r0-1/late"}) || !slices.Equal(res.Deleted, []string{stray}) {
		t.Fatalf("vacuum of a stray attempt of a forgotten run: %+v, %v", res, err)
	}
	problems, _, err := l.log.Verify(ctx)
	if err != nil || len(problems) > 0 {
		t.Fatalf("verify: %q, %v", problems, err)
	}
}
