package dedupe_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/s3"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/vacuum"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

const itemsTable = `CREATE TABLE items (
	id bigint PRIMARY KEY,
	updated_at timestamptz NOT NULL,
	name text,
	price numeric(12,2)
)`

// source is one test's PostgreSQL database and lake.
type source struct {
	t    *testing.T
	db   string
	dest *destination.Destination
}

func newSource(t *testing.T, dest *destination.Destination) *source {
	s := &source{t: t, db: pg.NewDatabase(t), dest: dest}
	s.exec(itemsTable)
	return s
}

func (s *source) exec(sql ...string) {
	s.t.Helper()
	pgtest.Exec(s.t, s.db, sql...)
}

// export runs one incremental export with an hour of lookback, so that
// every run re-reads the versions of the previous ones.
func (s *source) export() *export.Result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, err := pgsource.Connect(ctx, s.db)
	if err != nil {
		s.t.Fatal(err)
	}
	defer src.Close(ctx)
	res, err := export.Run(ctx, src, s.dest, s.dest.ObjectURL, export.Options{
		Model:    "items",
		Source:   pgsource.Spec{Table: "public.items", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"},
		Lookback: time.Hour,
	})
	if err != nil {
		s.t.Fatalf("export: %v", err)
	}
	return res
}

// cycle changes the source the way an application would: updates of old
// rows, inserts, deletes are not in scope (no delete log yet).
func (s *source) cycle(n int) {
	s.t.Helper()
	s.exec(
		fmt.Sprintf(`UPDATE items SET updated_at = clock_timestamp(), name = name || '+%d', price = price + 1 WHERE id %% %d = 0`, n, n+2),
		fmt.Sprintf(`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, g / 100.0 FROM generate_series(%d, %d) g`, 10000*n+1, 10000*n+300),
	)
}

// sourceRows and lakeRows render the table in one text form.
const rowsQuery = `SELECT id, strftime(updated_at, '%Y-%m-%d %H:%M:%S.%f'), name, price::VARCHAR FROM lake ORDER BY id`

func (s *source) sourceRows() []string {
	s.t.Helper()
	ctx := context.Background()
	src, err := pgsource.Connect(ctx, s.db)
	if err != nil {
		s.t.Fatal(err)
	}
	defer src.Close(ctx)
	rows, err := src.Conn().Query(ctx, `SELECT id, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), name, price::text FROM public.items ORDER BY id`)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id int64
		var ts, name, price string
		if err := rows.Scan(&id, &ts, &name, &price); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d|%s|%s|%s", id, ts, name, price))
	}
	return out
}

func lakeRows(t *testing.T, d *destination.Destination) []string {
	t.Helper()
	var out []string
	for _, r := range duck(t, d, "items", rowsQuery) {
		out = append(out, strings.Join(r, "|"))
	}
	return out
}

// assertExact: the committed set holds exactly the source's rows.
func (s *source) assertExact() {
	s.t.Helper()
	want, got := s.sourceRows(), lakeRows(s.t, s.dest)
	if len(want) != len(got) {
		s.t.Fatalf("lake has %d rows, source %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			s.t.Fatalf("row %d: lake %q, source %q", i, got[i], want[i])
		}
	}
}

func (s *source) dupes() string {
	return scalar(s.t, duck(s.t, s.dest, "items", "SELECT count(*) - count(DISTINCT id) FROM lake"))
}

func proof(t *testing.T, d *destination.Destination) {
	s := newSource(t, d)
	s.exec(`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, g / 100.0 FROM generate_series(1, 2000) g`)
	s.export()
	for n := 1; n <= 3; n++ {
		s.cycle(n)
		s.export()
	}
	if got := s.dupes(); got == "0" {
		t.Fatal("the exports overlap by an hour of lookback, yet the lake has no duplicates: the test proves nothing")
	}
	res := runDedupe(t, d, dedupe.Options{Model: "items", Buckets: 4})
	if res.Commit == nil || !res.FullRewrite {
		t.Fatalf("first dedupe: %+v", res)
	}
	s.assertExact()
	if got := readState(t, d, "items").Watermark; got == nil || *got != *res.Commit.Watermark {
		t.Fatalf("dedupe moved the watermark")
	}
	// Another cycle: the next dedupe rewrites only touched buckets.
	s.cycle(4)
	s.export()
	res2 := runDedupe(t, d, dedupe.Options{Model: "items"})
	if res2.Commit == nil || res2.FullRewrite {
		t.Fatalf("second dedupe: %+v", res2)
	}
	s.assertExact()
	if res3 := runDedupe(t, d, dedupe.Options{Model: "items"}); res3.Commit != nil {
		t.Fatalf("a dedupe with nothing new committed: %+v", res3)
	}
}

func TestProofLocal(t *testing.T) {
	proof(t, openDest(t, "file://"+t.TempDir()))
}

func TestProofS3(t *testing.T) {
	ep := os.Getenv("HIGHWATER_TEST_S3_ENDPOINT")
	if ep == "" {
		t.Skip("HIGHWATER_TEST_S3_ENDPOINT is not set: run scripts/servers.sh start and source its env file")
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", ep)
	var buf [6]byte
	rand.Read(buf[:])
	name := "hw-dedupe-" + hex.EncodeToString(buf[:])
	b, err := s3.New(t.Context(), name, s3.Options{UsePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client().CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var keys []string
		_ = b.List(ctx, "", func(a objstore.Attrs) error { keys = append(keys, a.Key); return nil })
		for _, k := range keys {
			_ = b.Delete(ctx, k)
		}
		_, _ = b.Client().DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	proof(t, &destination.Destination{Bucket: objstore.WithPrefix(b, "lake")})
}

// TestRaceExport: an export commits while a dedupe is about to commit.
// The dedupe rebases; the export's files stay committed; the next dedupe
// gives the exact source.
func TestRaceExport(t *testing.T) {
	d := openDest(t, "file://"+t.TempDir())
	s := newSource(t, d)
	s.exec(`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, g / 100.0 FROM generate_series(1, 1000) g`)
	s.export()
	s.cycle(1)
	s.export()
	var raced *export.Result
	res := runDedupe(t, d, dedupe.Options{Model: "items", Failpoint: func(name string) {
		if name == "dedupe-before-commit" && raced == nil {
			s.cycle(2)
			raced = s.export()
		}
	}})
	if res.Commit == nil || !res.Rebased || res.Rounds != 1 {
		t.Fatalf("dedupe did not rebase over the export: %+v", res)
	}
	live := readState(t, d, "items").FileSet()
	for _, f := range raced.Commit.Added {
		if _, ok := live[f.Key]; !ok {
			t.Fatalf("the export's file %s was lost by the dedupe", f.Key)
		}
	}
	runDedupe(t, d, dedupe.Options{Model: "items"})
	s.assertExact()
}

// TestRaceDedupe: another dedupe commits first; this one starts over and
// rows are never doubled.
func TestRaceDedupe(t *testing.T) {
	d := openDest(t, "file://"+t.TempDir())
	s := newSource(t, d)
	s.exec(`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, g / 100.0 FROM generate_series(1, 1000) g`)
	s.export()
	s.cycle(1)
	s.export()
	var once sync.Once
	res := runDedupe(t, d, dedupe.Options{Model: "items", Failpoint: func(name string) {
		if name == "dedupe-before-commit" {
			once.Do(func() {
				s.cycle(2)
				s.export()
				runDedupe(t, d, dedupe.Options{Model: "items"})
			})
		}
	}})
	if res.Rounds != 2 {
		t.Fatalf("dedupe did not start over: %+v", res)
	}
	if got := s.dupes(); got != "0" {
		t.Fatalf("%s duplicate keys", got)
	}
	s.assertExact()
}

// TestCrashAndVacuum: a dedupe dies just before its commit, leaving its
// files behind. The committed set is intact, a rerun finishes, and a vacuum
// declares the dead run abandoned and deletes its files and the inputs that
// the dedupe removed, never a committed file.
func TestCrashAndVacuum(t *testing.T) {
	d := openDest(t, "file://"+t.TempDir())
	s := newSource(t, d)
	s.exec(`INSERT INTO items SELECT g, clock_timestamp(), 'n' || g, g / 100.0 FROM generate_series(1, 1000) g`)
	s.export()
	s.cycle(1)
	s.export()
	before := readState(t, d, "items")
	var crashed string
	done := make(chan struct{})
	go func() {
		defer close(done)
		dedupe.Run(context.Background(), d, d.ObjectURL, dedupe.Options{Model: "items", Failpoint: func(name string) {
			if name == "dedupe-before-commit" {
				runtime.Goexit() // dies here: no commit, no clean-up of its outputs
			}
		}})
	}()
	<-done
	after := readState(t, d, "items")
	if after.Seq != before.Seq {
		t.Fatalf("a crashed dedupe committed: seq %d -> %d", before.Seq, after.Seq)
	}
	log := manifest.NewLog(d, "items")
	runs, _ := log.ListRuns(context.Background())
	crashed = runs[len(runs)-1]
	orphans := countObjects(t, d, "items/data/"+crashed+"/")
	if orphans == 0 {
		t.Fatal("the crashed dedupe left no files: the test proves nothing")
	}
	runDedupe(t, d, dedupe.Options{Model: "items"})
	s.assertExact()

	later := func() time.Time { return time.Now().Add(time.Hour) }
	dry, err := vacuum.Run(context.Background(), d, vacuum.Options{Model: "items", OlderThan: time.Minute, DryRun: true, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Declared) != 1 || dry.Declared[0] != crashed {
		t.Fatalf("dry run would declare %v, want [%s]", dry.Declared, crashed)
	}
	// The two exports' files, removed by the dedupe, plus the orphans.
	wantGone := len(before.Files) + orphans
	if len(dry.Deleted) != wantGone {
		t.Fatalf("dry run would delete %d objects, want %d: %v", len(dry.Deleted), wantGone, dry.Deleted)
	}
	if n := countObjects(t, d, "items/data/"+crashed+"/"); n != orphans {
		t.Fatalf("a dry run deleted files")
	}
	// Within the retention nothing goes.
	if young, err := vacuum.Run(context.Background(), d, vacuum.Options{Model: "items", OlderThan: 24 * time.Hour, Now: later}); err != nil || len(young.Deleted) != 0 {
		t.Fatalf("vacuum within the retention: %+v, %v", young, err)
	}
	res, err := vacuum.Run(context.Background(), d, vacuum.Options{Model: "items", OlderThan: time.Minute, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || len(res.Deleted) != wantGone {
		t.Fatalf("vacuum: %+v", res)
	}
	if _, dead := readState(t, d, "items").Abandoned[crashed]; !dead {
		t.Fatal("the crashed run was not declared abandoned in the log")
	}
	if n := countObjects(t, d, "items/data/"+crashed+"/"); n != 0 {
		t.Fatalf("%d orphans left", n)
	}
	for _, f := range readState(t, d, "items").Files {
		if _, err := d.Stat(context.Background(), "items/"+f.Key); err != nil {
			t.Fatalf("vacuum deleted committed file %s: %v", f.Key, err)
		}
	}
	s.assertExact()
}

func countObjects(t *testing.T, d *destination.Destination, prefix string) int {
	t.Helper()
	n := 0
	if err := d.List(context.Background(), prefix, func(objstore.Attrs) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
