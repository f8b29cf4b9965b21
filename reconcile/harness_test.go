package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/reconcile"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// lake is one test's source database and destination.
type lake struct {
	t     *testing.T
	db    string
	dest  string
	model string
	spec  pgsource.Spec
}

func newLake(t *testing.T, setup ...string) *lake {
	t.Helper()
	return &lake{t: t, db: pg.NewDatabase(t, setup...), dest: "file://" + t.TempDir(), model: "items",
		spec: pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}}
}

func (l *lake) exec(sql ...string) {
	l.t.Helper()
	pgtest.Exec(l.t, l.db, sql...)
}

func (l *lake) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Minute)
}

func (l *lake) open(ctx context.Context) (*pgsource.Source, *destination.Destination) {
	l.t.Helper()
	src, err := pgsource.Connect(ctx, l.db)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { src.Close(context.Background()) })
	var tenant *string
	if l.spec.Tenant != nil {
		tenant = l.spec.Tenant
	}
	d, err := destination.OpenTenant(ctx, l.dest, tenant)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { d.Close() })
	return src, d
}

func (l *lake) export() *export.Result {
	l.t.Helper()
	ctx, cancel := l.ctx()
	defer cancel()
	src, d := l.open(ctx)
	res, err := export.Run(ctx, src, d, d.ObjectURL, export.Options{Model: l.model, Source: l.spec, Lookback: 0})
	if err != nil {
		l.t.Fatalf("export: %v", err)
	}
	return res
}

func (l *lake) dedupe() *dedupe.Result {
	l.t.Helper()
	ctx, cancel := l.ctx()
	defer cancel()
	_, d := l.open(ctx)
	res, err := dedupe.Run(ctx, d, d.ObjectURL, dedupe.Options{Model: l.model})
	if err != nil {
		l.t.Fatalf("dedupe: %v", err)
	}
	return res
}

func (l *lake) tryReconcile(opts reconcile.Options) (*reconcile.Result, error) {
	l.t.Helper()
	ctx, cancel := l.ctx()
	defer cancel()
	src, d := l.open(ctx)
	opts.Model, opts.Source = l.model, l.spec
	return reconcile.Run(ctx, src, d, d.ObjectURL, opts)
}

func (l *lake) reconcile(opts reconcile.Options) *reconcile.Result {
	l.t.Helper()
	res, err := l.tryReconcile(opts)
	if err != nil {
		l.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (l *lake) state() *manifest.State {
	l.t.Helper()
	ctx, cancel := l.ctx()
	defer cancel()
	_, d := l.open(ctx)
	st, err := manifest.NewLog(d, l.model).ReadState(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

// want is what a reconcile should find: counts, and the keys of each
// kind (all of them, when there are at most ten).
type want struct {
	matched                 int64
	missing, extra, changed []string
}

// keys renders sample keys as "a|b" strings, sorted.
func keys(ks [][]string) []string {
	out := []string{}
	for _, k := range ks {
		out = append(out, strings.Join(k, "|"))
	}
	slices.Sort(out)
	return out
}

func check(t *testing.T, res *reconcile.Result, w want) {
	t.Helper()
	r := res.Report
	sorted := func(s []string) []string {
		s = append([]string{}, s...)
		slices.Sort(s)
		return s
	}
	got := fmt.Sprintf("matched %d missing %v extra %v changed %v", r.Matched, keys(r.MissingKeys), keys(r.ExtraKeys), keys(r.ChangedKeys))
	exp := fmt.Sprintf("matched %d missing %v extra %v changed %v", w.matched, sorted(w.missing), sorted(w.extra), sorted(w.changed))
	if got != exp {
		t.Errorf("reconcile found\n  %s\nwant\n  %s", got, exp)
	}
	if r.Missing != int64(len(w.missing)) || r.Extra != int64(len(w.extra)) || r.Changed != int64(len(w.changed)) {
		t.Errorf("counts missing %d extra %d changed %d, want %d %d %d", r.Missing, r.Extra, r.Changed, len(w.missing), len(w.extra), len(w.changed))
	}
}
