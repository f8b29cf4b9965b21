package export_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumedOldFullRefreshTakesEveryStamp: a full refresh planned by a
// build that did not yet record include_beyond_to, and resumed by this
// one, still reads the rows stamped past its to (infinity, the future):
// a full refresh replaces every earlier file, so a row it skips is lost.
func TestResumedOldFullRefreshTakesEveryStamp(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 second', md5(g::text), g FROM generate_series(1, 3000) g`,
		`INSERT INTO items VALUES (9001, 'infinity', 'inf', 1), (9002, now() + interval '1 year', 'future', 1)`)
	opts := l.options()
	opts.FullRefresh = true
	opts.PageRows = 100
	opts.TargetFileBytes = 32 << 10
	opts.RowGroupBytes = 8 << 10
	l.exportCrashing(opts, "after-checkpoint", 2)

	// Make the plan look like an older build's.
	plans, err := filepath.Glob(filepath.Join(l.dir, l.model, "_runs", "*", "plan.json"))
	if err != nil || len(plans) != 1 {
		t.Fatalf("plans %v: %v", plans, err)
	}
	data, err := os.ReadFile(plans[0])
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(data), `"include_beyond_to": true`, `"include_beyond_to": false`, 1)
	if old == string(data) {
		t.Fatalf("the plan does not record include_beyond_to:\n%s", data)
	}
	if err := os.WriteFile(plans[0], []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}

	res := l.mustExport(opts)
	if !res.Resumed {
		t.Fatal("the full refresh was not resumed")
	}
	got := l.query(`SELECT count(*), count(*) FILTER (WHERE id > 9000) FROM lake`)[0]
	if got[0] != "3002" || got[1] != "2" {
		t.Fatalf("the lake holds %s rows, %s of them stamped past to: want 3002 and 2", got[0], got[1])
	}
}
