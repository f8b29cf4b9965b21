package reconcile_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/highwater-dev/highwater/reconcile"
)

// TestParallelJudging reconciles a lake of several versions per key with
// every kind of difference spread over all partitions, judged one
// partition at a time and by several judges at once (with partitions so
// small that they split again, in parallel), with and without a window:
// every way finds exactly the same counts and samples, and those are
// what the test made. A repair judged in parallel then leaves the lake
// equal to the source.
func TestParallelJudging(t *testing.T) {
	const n = 20_000
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, name text, price numeric(12,2))`,
		fmt.Sprintf(`INSERT INTO items SELECT i, '2026-01-01'::timestamptz + i * interval '1 s', 'n' || i, i / 100.0 FROM generate_series(1, %d) i`, n))
	l.export()
	// Second versions of a third of the keys, so that dedupe's rule
	// picks winners across files.
	l.exec(`UPDATE items SET name = 'v2 ' || id, updated_at = now() WHERE id % 3 = 0`)
	l.export()
	l.exec(
		`UPDATE items SET name = 'unseen' WHERE id % 97 = 1`,                                       // changed
		`DELETE FROM items WHERE id % 89 = 2`,                                                      // extra
		`INSERT INTO items SELECT -i, '2001-01-01', 'backdated', 0 FROM generate_series(1, 150) i`, // missing
	)
	var changed, extra, missing []string
	for i := 1; i <= n; i++ {
		switch {
		case i%89 == 2:
			extra = append(extra, fmt.Sprint(i))
		case i%97 == 1:
			changed = append(changed, fmt.Sprint(i))
		}
	}
	for i := 150; i >= 1; i-- {
		missing = append(missing, fmt.Sprint(-i))
	}
	matched := int64(n - len(changed) - len(extra))

	ways := []struct {
		name   string
		judges int
		share  int64
	}{{"one judge", 1, 1 << 30}, {"four judges", 4, 0}, {"four judges, splitting", 4, 64 << 10}, {"three judges, splitting", 3, 16 << 10}}
	for _, win := range []reconcile.Options{{}, {WindowStart: "2026-01-01 01:00:00+00", WindowEnd: "2026-01-02 03:00:00+00"}} {
		var first *reconcile.Result
		for _, w := range ways {
			opts := win
			opts.SetJudging(w.judges, w.share)
			res := l.reconcile(opts)
			if first == nil {
				first = res
				r := res.Report
				got := fmt.Sprint(r.Matched, r.Missing, r.Extra, r.Changed, keys(r.MissingKeys), keys(r.ExtraKeys), keys(r.ChangedKeys))
				exp := fmt.Sprint(matched, len(missing), len(extra), len(changed), sorted(missing[:reconcile.Samples]), sorted(extra[:reconcile.Samples]), sorted(changed[:reconcile.Samples]))
				if win.WindowStart == "" && got != exp {
					t.Errorf("%s found (matched, missing, extra, changed, samples)\n  %s\nwant\n  %s", w.name, got, exp)
				}
				continue
			}
			if !reflect.DeepEqual(res.Report, first.Report) {
				t.Errorf("window %q: %s found\n  %+v\nand %s\n  %+v", win.WindowStart, w.name, res.Report, ways[0].name, first.Report)
			}
		}
		if win.WindowStart != "" && first.Report.Matched+first.Report.Changed+first.Report.Extra == 0 {
			t.Errorf("the window judged nothing: %+v", first.Report)
		}
	}

	opts := reconcile.Options{Repair: true}
	opts.SetJudging(4, 64<<10)
	rep := l.reconcile(opts)
	if want := int64(len(missing) + len(changed)); rep.Report.RepairedRows != want || rep.Report.Tombstones != int64(len(extra)) {
		t.Fatalf("repair: %+v, want %d rows and %d tombstones", rep.Report, want, len(extra))
	}
	l.dedupe()
	if res := l.reconcile(reconcile.Options{}); !res.Equal() || res.Report.Matched != int64(n-len(extra)+len(missing)) {
		t.Fatalf("after the repair and a dedupe: %+v", res.Report)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
