package dedupe_test

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/dedupe"
)

// TestWideRowWarns: a row is never split, so one wider than what the
// memory limit leaves a worker for it makes the process exceed the limit.
// The dedupe says so, in its result and its commit, and still dedupes.
func TestWideRowWarns(t *testing.T) {
	d := openDest(t, "file://"+t.TempDir())
	s := newSource(t, d)
	s.exec(`INSERT INTO items SELECT g, now(), 'n' || g, g FROM generate_series(1, 100) g`,
		`INSERT INTO items VALUES (101, now(), repeat('w', 12000000), 1)`)
	s.export()
	s.exec(`UPDATE items SET updated_at = clock_timestamp() WHERE id <= 10`)
	s.export()

	res := runDedupe(t, d, dedupe.Options{Model: "items", MemoryLimit: 64 << 20})
	warned := func(ws []string) bool {
		for _, w := range ws {
			if strings.Contains(w, "wider than") && strings.Contains(w, "--memory-limit") {
				return true
			}
		}
		return false
	}
	if !warned(res.Warnings) {
		t.Fatalf("no warning about the 12 MB row under a 64 MiB limit: %q", res.Warnings)
	}
	if res.Commit == nil || !warned(res.Commit.Warnings) {
		t.Fatal("the commit does not record the warning")
	}
	s.assertExact()

	// Narrow rows under a generous limit: no warning.
	s.exec(`DELETE FROM items WHERE id = 101`, `UPDATE items SET updated_at = clock_timestamp() WHERE id <= 20`)
	d2 := openDest(t, "file://"+t.TempDir())
	s.dest = d2
	s.export()
	if res := runDedupe(t, d2, dedupe.Options{Model: "items", MemoryLimit: 512 << 20}); warned(res.Warnings) {
		t.Fatalf("a warning without a wide row: %q", res.Warnings)
	}
}
