package export_test

import (
	"context"
	"errors"
	"testing"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/manifest"
)

// stalledExport starts an export that stops before its commit, runs meanwhile
// with the run's plan, and then lets the export try to commit.
func (l *lake) stalledExport(opts export.Options, meanwhile func(p *manifest.Plan)) error {
	l.t.Helper()
	stalled, resume := make(chan struct{}), make(chan struct{})
	opts.Failpoint = func(name string) {
		if name == "before-commit" {
			close(stalled)
			<-resume
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l.export(opts)
		errc <- err
	}()
	<-stalled
	d := l.openDest()
	log := manifest.NewLog(d, l.model)
	runs, err := log.ListRuns(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	p, err := log.ReadPlan(context.Background(), runs[len(runs)-1])
	if err != nil {
		l.t.Fatal(err)
	}
	meanwhile(p)
	close(resume)
	return <-errc
}

// Every commit that makes a run's plan dead (manifest.Kills) stops the
// run's commit, whatever the run's kind, as ErrRaceLost; so does another
// attempt that committed the run. A run a vacuum declared dead stops with
// manifest.ErrAbandoned.
func TestDeadPlansDoNotCommit(t *testing.T) {
	setup := `INSERT INTO items SELECT g, now() - interval '1 day', 'x', 1 FROM generate_series(1, 20) g`
	backfill := func(l *lake) export.Options {
		o := l.options()
		o.WindowStart, o.WindowEnd = "2000-01-01 00:00:00+00", "2100-01-01 00:00:00+00"
		return o
	}
	full := func(l *lake) export.Options { o := l.options(); o.FullRefresh = true; return o }
	for _, tc := range []struct {
		name      string
		run       func(*lake) export.Options
		meanwhile func(*lake) export.Options // an export committed while the run stalls
		abandon   bool                       // or a vacuum's declaration
		want      error
	}{
		{"export after a full refresh", (*lake).options, full, false, manifest.ErrSuperseded},
		{"export resumed by another", (*lake).options, (*lake).options, false, manifest.ErrCommitted},
		{"full refresh after an export", full, (*lake).options, false, manifest.ErrSuperseded},
		{"backfill after a full refresh", backfill, full, false, manifest.ErrSuperseded},
		{"export declared abandoned", (*lake).options, nil, true, manifest.ErrAbandoned},
		{"backfill declared abandoned", backfill, nil, true, manifest.ErrAbandoned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLake(t, itemsTable, setup)
			l.mustExport(l.options())
			before := l.state()
			err := l.stalledExport(tc.run(l), func(p *manifest.Plan) {
				if tc.meanwhile != nil {
					l.mustExport(tc.meanwhile(l))
					return
				}
				d, err := destination.Open(context.Background(), l.destURL(), "")
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				_, _, err = manifest.NewLog(d, l.model).Append(context.Background(), func(st *manifest.State) (*manifest.Commit, error) {
					return &manifest.Commit{Kind: manifest.KindVacuum, Identity: *st.Identity, Watermark: st.Watermark, Abandoned: []string{p.RunID}}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if raced := errors.Is(err, export.ErrRaceLost); raced != (tc.want != manifest.ErrAbandoned) {
				t.Fatalf("%v: ErrRaceLost %v", err, raced)
			}
			if st := l.state(); st.Seq != before.Seq+1 {
				t.Fatalf("seq %d after the dead run, want %d: it committed", st.Seq, before.Seq+1)
			}
		})
	}
}
