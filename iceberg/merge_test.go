package iceberg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/highwater-dev/highwater/iceberg"
)

// TestManifestsMerged: each append writes a manifest, and the view merges
// them, so that after many commits the current snapshot's manifest list
// still names a bounded number of manifests, and the table still reads
// back equal to PostgreSQL with iceberg-go's reader.
func TestManifestsMerged(t *testing.T) {
	l := newLake(t, "", itemsDDL, `INSERT INTO items (id, name) VALUES (1, 'one')`)
	l.export(false)
	l.sync()
	most := 0
	for i := 2; i <= 3*iceberg.MergeManifests+2; i++ {
		l.exec(fmt.Sprintf(`INSERT INTO items (id, name) VALUES (%d, 'n%d')`, i, i),
			`UPDATE items SET name = name || '+', updated_at = now() WHERE id = 1`)
		l.export(false)
		l.sync()
		tbl := l.table()
		fs, err := tbl.FS(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		mans, err := tbl.CurrentSnapshot().Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		if len(mans) > iceberg.MergeManifests {
			t.Fatalf("after %d appends the current snapshot names %d manifests, want at most %d", i, len(mans), iceberg.MergeManifests)
		}
		most = max(most, len(mans))
	}
	t.Logf("at most %d manifests in %d appends", most, 3*iceberg.MergeManifests+2)
	l.compare(itemCols...)
}
