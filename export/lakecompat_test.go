package export_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/laketest"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/readers"
	"github.com/parquet-go/parquet-go"
)

// openDest opens the lake's destination for a test's own reads.
func (l *lake) openDest() *destination.Destination {
	l.t.Helper()
	d, err := destination.Open(context.Background(), l.destURL(), "")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { d.Close() })
	return d
}

// wantFiles is what `highwater files` prints: the committed set's URLs.
func (l *lake) wantFiles() string {
	l.t.Helper()
	d := l.openDest()
	log := manifest.NewLog(d, l.model)
	var b strings.Builder
	for _, f := range l.state().Files {
		b.WriteString(d.ObjectURL(log.Key(f.Key)) + "\n")
	}
	return b.String()
}

func (l *lake) symlinkManifest() string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, l.model, filepath.FromSlash(manifest.SymlinkManifestKey)))
	if err != nil {
		l.t.Fatalf("read the symlink manifest: %v", err)
	}
	return string(b)
}

// checkSymlink asserts that the symlink manifest lists exactly the
// committed set, in commit order.
func (l *lake) checkSymlink(when string) {
	l.t.Helper()
	want := l.wantFiles()
	if want == "" {
		l.t.Fatalf("%s: no committed files", when)
	}
	if got := l.symlinkManifest(); got != want {
		l.t.Fatalf("%s: symlink manifest\n%s\nwant (highwater files)\n%s", when, got, want)
	}
}

// ddlQuery runs the DuckDB DDL that `highwater ddl --engine duckdb` prints,
// then q over the view "lake".
func (l *lake) ddlQuery(q string) [][]string {
	l.t.Helper()
	d := l.openDest()
	files, fields, err := readers.Load(context.Background(), manifest.NewLog(d, l.model), d.ObjectURL)
	if err != nil {
		l.t.Fatal(err)
	}
	ddl, err := readers.Generate(readers.DuckDB, readers.Input{Table: "lake", Files: files, Fields: fields})
	if err != nil {
		l.t.Fatal(err)
	}
	db := laketest.DuckDB(l.t, nil)
	if _, err := db.Exec(ddl); err != nil {
		l.t.Fatalf("run the DuckDB DDL: %v\n%s", err, ddl)
	}
	return laketest.Query(l.t, db, q)
}

func TestSymlinkManifestAfterEveryCommit(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, name text)`,
		`INSERT INTO items SELECT g, now(), 'x' FROM generate_series(1, 30) g`)
	opts := l.options()
	l.mustExport(opts)
	l.checkSymlink("after the first export")
	l.exec(`UPDATE items SET name = 'y', updated_at = clock_timestamp() WHERE id <= 5`)
	l.mustExport(opts)
	l.checkSymlink("after the second export")
	if n := strings.Count(l.symlinkManifest(), "\n"); n != 2 {
		t.Fatalf("after two exports the manifest lists %d files, want 2", n)
	}
	old := l.symlinkManifest()
	opts.FullRefresh = true
	l.mustExport(opts)
	l.checkSymlink("after a full refresh")
	for _, u := range strings.Fields(old) {
		if strings.Contains(l.symlinkManifest(), u) {
			t.Fatalf("the full refresh left the replaced file %s in the manifest", u)
		}
	}
}

// stallingBucket blocks the first Put of the symlink manifest until
// released, to play a slow writer.
type stallingBucket struct {
	objstore.Bucket
	once     sync.Once
	entered  chan struct{}
	release  chan struct{}
	manPuts  atomic.Int32
	firstPut atomic.Value // string: what the stalled Put wrote
}

func (b *stallingBucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	if !strings.HasSuffix(key, manifest.SymlinkManifestKey) {
		return b.Bucket.Put(ctx, key, r, opts)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	b.manPuts.Add(1)
	b.once.Do(func() {
		b.firstPut.Store(string(body))
		close(b.entered)
		<-b.release
	})
	return b.Bucket.Put(ctx, key, strings.NewReader(string(body)), opts)
}

func TestSlowSymlinkWriterNeverLeavesAnOlderList(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, name text)`,
		`INSERT INTO items SELECT g, now(), 'x' FROM generate_series(1, 20) g`)
	opts := l.options()
	l.mustExport(opts)
	afterFirst := l.wantFiles()

	slow := &stallingBucket{Bucket: l.openDest(), entered: make(chan struct{}), release: make(chan struct{})}
	d := l.openDest()
	done := make(chan error, 1)
	go func() {
		done <- manifest.NewLog(slow, l.model).WriteSymlinkManifest(context.Background(), d.ObjectURL)
	}()
	select {
	case <-slow.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow writer never reached its Put")
	}
	// The slow writer has read the head at seq 1 and is about to write its
	// list. Meanwhile a second commit lands and writes its own manifest.
	l.exec(`INSERT INTO items SELECT g, clock_timestamp(), 'late' FROM generate_series(21, 25) g`)
	l.mustExport(opts)
	newest := l.wantFiles()
	if newest == afterFirst || l.symlinkManifest() != newest {
		t.Fatalf("the second export did not write the newest list:\n%s", l.symlinkManifest())
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatalf("slow writer: %v", err)
	}
	if got := slow.firstPut.Load().(string); got != afterFirst {
		t.Fatalf("the stalled Put should carry the list of seq 1, it wrote:\n%s", got)
	}
	if n := slow.manPuts.Load(); n < 2 {
		t.Fatalf("the slow writer wrote %d times; after its stale write it must notice the new head and write again", n)
	}
	if got := l.symlinkManifest(); got != newest {
		t.Fatalf("after the slow writer the manifest is\n%s\nwant the newest committed set\n%s", got, newest)
	}
}

func TestSchemaEvolutionThroughExport(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, name varchar(20), code varchar(8), qty int)`,
		`INSERT INTO items SELECT g, now(), 'n' || g, 'c' || g, g FROM generate_series(1, 10) g`)
	opts := l.options()
	step := func(what string, sql ...string) {
		t.Helper()
		l.exec(sql...)
		l.mustExport(opts)
		l.checkSymlink(what)
	}
	step("first export")
	step("after ADD COLUMN", `ALTER TABLE items ADD COLUMN note text`,
		`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, 'c' || g, g, 'note ' || g FROM generate_series(11, 15) g`)
	step("after DROP COLUMN", `ALTER TABLE items DROP COLUMN name`,
		`INSERT INTO items SELECT g, clock_timestamp(), 'c' || g, g, 'note ' || g FROM generate_series(16, 20) g`)
	step("after varchar to text", `ALTER TABLE items ALTER COLUMN code TYPE text`,
		`INSERT INTO items SELECT g, clock_timestamp(), 'long code ' || g, g, NULL FROM generate_series(21, 25) g`)

	st := l.state()
	if len(st.SchemaHistory) != 4 {
		t.Fatalf("schema history %+v, want a new schema at each of the 4 commits", st.SchemaHistory)
	}
	for i, h := range st.SchemaHistory {
		if h.Seq != int64(i+1) {
			t.Fatalf("schema history %+v: change %d at seq %d", st.SchemaHistory, i, h.Seq)
		}
	}
	// Every reader sees the union: name (dropped) and note (added) included.
	d := l.openDest()
	_, fields, err := readers.Load(context.Background(), manifest.NewLog(d, l.model), d.ObjectURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := fieldNames(fields); got != "id updated_at code qty note name _hw_version _hw_deleted" {
		t.Fatalf("union schema %s", got)
	}
	want := l.pgQuery(`SELECT id, code, qty, coalesce(note, 'NULL') FROM items ORDER BY id`)
	for _, got := range [][][]string{
		l.query(`SELECT id, code, qty, coalesce(note, 'NULL') FROM lake ORDER BY id`),
		l.ddlQuery(`SELECT id, code, qty, coalesce(note, 'NULL') FROM lake ORDER BY id`),
	} {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("DuckDB over the committed files:\n%v\nwant\n%v", got, want)
		}
	}
	if got := fmt.Sprint(l.ddlQuery(`SELECT count(name), count(note), count(*) FILTER (WHERE id <= 10 AND note IS NULL) FROM lake`)); got != "[[15 10 10]]" {
		t.Fatalf("dropped and added columns: %s; want name in the 15 rows written before the drop, note in 10", got)
	}

	// int to bigint changes the Parquet type: refused, naming the column
	// and the remedy, and nothing is committed.
	l.exec(`ALTER TABLE items ALTER COLUMN qty TYPE bigint`,
		`INSERT INTO items SELECT g, clock_timestamp(), 'c' || g, 5000000000 + g, NULL FROM generate_series(26, 30) g`)
	_, err = l.export(opts)
	if err == nil || !strings.Contains(err.Error(), `"qty"`) || !strings.Contains(err.Error(), "--full-refresh") {
		t.Fatalf("int to bigint: %v; want an error naming \"qty\" and --full-refresh", err)
	}
	if after := l.state(); after.Seq != st.Seq {
		t.Fatalf("the refused run committed seq %d", after.Seq)
	}
	// A full refresh replaces every file, so the old type no longer
	// constrains the new one.
	opts.FullRefresh = true
	if _, err := l.export(opts); err != nil {
		t.Fatalf("full refresh after int to bigint: %v\n(export/run.go checks formats.Evolve against the committed schema even for --full-refresh, which replaces every file: the check must be skipped for a full refresh)", err)
	}
	l.checkSymlink("after the full refresh")
	st = l.state()
	if len(st.SchemaHistory) != 5 || st.SchemaHistory[4].Seq != st.Seq {
		t.Fatalf("schema history after the full refresh: %+v", st.SchemaHistory)
	}
	if q := fieldByName(st.Schema.Fields, "qty"); q.Physical != "INT64" {
		t.Fatalf("qty after the full refresh: %+v", q)
	}
	_, fields, err = readers.Load(context.Background(), manifest.NewLog(d, l.model), d.ObjectURL)
	if err != nil {
		t.Fatalf("DDL after the full refresh: %v", err)
	}
	// The replaced files are gone, and with them the dropped column.
	if got := fieldNames(fields); got != "id updated_at code qty note _hw_version _hw_deleted" {
		t.Fatalf("union schema after the full refresh: %s", got)
	}
	want = l.pgQuery(`SELECT id, code, qty, coalesce(note, 'NULL') FROM items ORDER BY id`)
	got := l.ddlQuery(`SELECT id, code, qty, coalesce(note, 'NULL') FROM lake ORDER BY id`)
	if len(want) != 30 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the full refresh:\n%v\nwant\n%v", got, want)
	}
}

func fieldNames(fs []formats.Field) string {
	var names []string
	for _, f := range fs {
		names = append(names, f.Name)
	}
	return strings.Join(names, " ")
}

func fieldByName(fs []formats.Field, name string) formats.Field {
	for _, f := range fs {
		if f.Name == name {
			return f
		}
	}
	return formats.Field{}
}

func TestFilesRollAtTargetSize(t *testing.T) {
	// md5 hex digests barely compress, so the compressed size tracks the
	// raw size and the files must land near the target.
	l := newLake(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, payload text)`,
		`INSERT INTO items SELECT g, now(), md5(g::text) || md5((g * 7)::text) || md5((g * 13)::text) || md5((g * 31)::text)
		 FROM generate_series(1, 60000) g`)
	opts := l.options()
	const target = 1 << 20
	opts.TargetFileBytes = target
	opts.RowGroupBytes = 128 << 10
	opts.PageRows = 1000
	res := l.mustExport(opts)
	files := res.Commit.Added
	if len(files) < 3 {
		t.Fatalf("%d files for ~%d MiB of data; want several", len(files), res.Commit.Metrics.Bytes>>20)
	}
	var rows int64
	for i, f := range files {
		rows += f.Rows
		if i < len(files)-1 && (f.Bytes < target*9/10 || f.Bytes > target*11/10) {
			t.Errorf("file %d of %d is %d bytes, not within 10%% of %d", i+1, len(files), f.Bytes, target)
		}
		if i == len(files)-1 && f.Bytes > target*11/10 {
			t.Errorf("the last file is %d bytes, above the target", f.Bytes)
		}
		path := filepath.Join(l.dir, l.model, filepath.FromSlash(f.Key))
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := fh.Stat()
		pf, err := parquet.OpenFile(fh, fi.Size())
		if err != nil {
			t.Fatalf("open %s: %v", f.Key, err)
		}
		if n := len(pf.RowGroups()); i < len(files)-1 && n < 4 {
			t.Errorf("file %d has %d row groups; the 128 KiB bound should make about 8", i+1, n)
		}
		lastKey, _ := json.Marshal(f.Last)
		for k, want := range map[string]string{
			"highwater.model":         l.model,
			"highwater.run_id":        res.Plan.RunID,
			"highwater.interval.to":   res.Plan.Interval.To,
			"highwater.interval.from": "(none)", // a first run has no lower bound
			"highwater.last_key":      string(lastKey),
		} {
			if got, ok := pf.Lookup(k); !ok || got != want {
				t.Errorf("file %d: %s = %q (present %v), want %q", i+1, k, got, ok, want)
			}
		}
		fh.Close()
	}
	if rows != 60000 {
		t.Fatalf("files hold %d rows, want 60000", rows)
	}
	if got := scalar(t, l.query(`SELECT count(DISTINCT id) FROM lake`)); got != "60000" {
		t.Fatalf("DuckDB counts %s rows", got)
	}
}
