package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/internal/icebergtest"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/vacuum"
)

// TestVacuumCleansMetadata: a vacuum expires the snapshots that name the
// files it deletes, then deletes the metadata versions that are no longer
// retained and the manifest lists and manifests that only they named.
// Afterwards every retained metadata version and every live snapshot still
// scans with iceberg-go's reader, the newest equal to PostgreSQL, and no
// Avro file under metadata/ is left that no retained version names.
func TestVacuumCleansMetadata(t *testing.T) {
	l := newLake(t, "", itemsDDL, `INSERT INTO items (id, name) VALUES (1, 'one'), (2, 'two')`)
	update := func(i int) {
		l.exec(fmt.Sprintf(`INSERT INTO items (id, name) VALUES (%d, 'n%d')`, 100+i, i),
			`UPDATE items SET name = name || '+', updated_at = now() WHERE id = 1`)
		l.export(false)
		l.sync()
	}
	l.export(false)
	l.sync()
	for i := range 3 {
		update(i)
	}
	l.dedupe() // removes the files of the exports: what vacuum deletes
	l.sync()
	before := l.metadataFiles()
	time.Sleep(10 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(10 * time.Millisecond)
	// More versions after the cutoff than the metadata log keeps (10): those
	// beyond it stay, as a catalog that lags by less than the retention
	// may name them.
	for i := 3; i < 16; i++ {
		update(i)
	}

	mid := l.metadataFiles()
	ctx := context.Background()
	d := l.open()
	v := l.view()
	res, err := vacuum.Run(ctx, d, vacuum.Options{Model: l.model, OlderThan: time.Since(cutoff),
		BeforeDelete: func(ctx context.Context, st *manifest.State, doomed []string) error {
			if _, err := v.Sync(ctx, st); err != nil {
				return err
			}
			_, err := v.Expire(ctx, st, doomed, cutoff)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) == 0 {
		t.Fatal("the vacuum deleted no data file: the test tests nothing")
	}
	cleaned, err := v.Clean(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("vacuum deleted %d data files and %d metadata files", len(res.Deleted), len(cleaned))

	after, versions := l.checkRetained()
	for _, f := range before {
		if strings.HasSuffix(f, ".metadata.json") && slices.Contains(after, f) {
			t.Errorf("%s, current before the cutoff, whose snapshot the vacuum expired, is left", f)
		}
	}
	for _, f := range mid {
		if strings.HasSuffix(f, ".metadata.json") && !slices.Contains(before, f) && !slices.Contains(after, f) {
			t.Errorf("%s, written after the cutoff, is gone", f)
		}
	}
	if len(cleaned) == 0 || len(after) >= len(mid) {
		t.Errorf("nothing was cleaned: %d metadata files before the vacuum, %d after; %v", len(mid), len(after), cleaned)
	}
	t.Logf("metadata files: %d before the vacuum, %d after (%d versions)", len(mid), len(after), versions)

	// One more commit, then a vacuum whose retention ends now: it expires
	// every snapshot but the new current one, and every version whose
	// current snapshot that was goes, and with them what only they named.
	update(16)
	st, err := manifest.NewLog(d, l.model).ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := v.Expire(ctx, st, nil, now); err != nil {
		t.Fatal(err)
	}
	if cleaned, err = v.Clean(ctx, now); err != nil {
		t.Fatal(err)
	}
	last, versions := l.checkRetained()
	if len(l.table().Metadata().Snapshots()) != 1 || versions > 2 || len(last) >= len(after) || !slices.ContainsFunc(cleaned, func(k string) bool { return strings.HasSuffix(k, ".avro") }) {
		t.Errorf("the second vacuum cleaned %v: %d metadata files left of %d", cleaned, len(last), len(after))
	}
	t.Logf("after the second vacuum: %d metadata files (%d versions)", len(last), versions)
}

// checkRetained scans every metadata version left, and every live snapshot
// of the newest, with iceberg-go's reader; compares the newest with
// PostgreSQL; and checks that every Avro file left is named by a version
// left. It returns the names under metadata/ and the number of versions.
func (l *lake) checkRetained() ([]string, int) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	files := l.metadataFiles()
	versions := 0
	named := map[string]bool{}
	for _, f := range files {
		if !strings.HasSuffix(f, ".metadata.json") {
			continue
		}
		versions++
		loc := l.location() + "/metadata/" + f
		tbl, err := table.NewFromLocation(ctx, table.Identifier{"t"}, loc, iceio.LoadFSFunc(nil, loc), nil)
		if err != nil {
			t.Fatalf("load retained version %s: %v", f, err)
		}
		icebergtest.Rows(t, tbl, 0) // fails on a missing file
		fsys, err := tbl.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Metadata().Snapshots() {
			named[filepath.Base(s.ManifestList)] = true
			mans, err := s.Manifests(fsys)
			if err != nil {
				t.Fatalf("version %s, snapshot %d: %v", f, s.SnapshotID, err)
			}
			for _, m := range mans {
				named[filepath.Base(m.FilePath())] = true
			}
		}
	}
	tbl := l.table()
	for _, s := range tbl.Metadata().Snapshots() {
		icebergtest.Rows(t, tbl, s.SnapshotID)
	}
	l.compare(itemCols...)
	for _, f := range files {
		if strings.HasSuffix(f, ".avro") && !named[f] {
			t.Errorf("%s is left, and no retained version names it", f)
		}
	}
	return files, versions
}

// metadataFiles lists the names under the table's metadata/.
func (l *lake) metadataFiles() []string {
	l.t.Helper()
	ents, err := os.ReadDir(strings.TrimPrefix(l.location(), "file://") + "/metadata")
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
