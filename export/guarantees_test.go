package export_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/pgsource"
)

// errCrash stands for the process dying at a failpoint.
var errCrash = errors.New("crash")

// exportCrashing runs an export that "dies" at the n-th time it reaches
// point: the failpoint panics and the panic is recovered here, so nothing
// after that point runs, as if the process had been killed.
func (l *lake) exportCrashing(opts export.Options, point string, n int) {
	l.t.Helper()
	seen := 0
	opts.Failpoint = func(name string) {
		if name == point {
			if seen++; seen == n {
				panic(errCrash)
			}
		}
	}
	defer func() {
		if r := recover(); r != errCrash {
			if r != nil {
				panic(r)
			}
			l.t.Fatalf("failpoint %s:%d was never reached", point, n)
		}
	}()
	l.export(opts)
}

func TestTiesAcrossPagesAndFiles(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01 00:00:00.123456+00', md5(g::text) || md5((g+1)::text) || md5((g+2)::text), 1 FROM generate_series(1, 10000) g`)
	opts := l.options()
	opts.PageRows = 100
	opts.TargetFileBytes = 64 << 10 // many files
	opts.RowGroupBytes = 16 << 10
	res := l.mustExport(opts)
	if n := len(res.Commit.Added); n < 3 {
		t.Fatalf("want several files, got %d", n)
	}
	if res.Commit.Metrics.Pages < 100 {
		t.Fatalf("want at least 100 pages, got %d", res.Commit.Metrics.Pages)
	}
	got := l.query("SELECT count(*), count(DISTINCT id), min(id), max(id), min(updated_at), max(updated_at) FROM lake")[0]
	want := []string{"10000", "10000", "1", "10000", "2026-01-01 00:00:00.123456", "2026-01-01 00:00:00.123456"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lake: got %v, want %v", got, want)
	}
	// Files follow each other in key order without overlap.
	for i := 1; i < len(res.Commit.Added); i++ {
		prev, cur := res.Commit.Added[i-1], res.Commit.Added[i]
		if cur.First.Key[0] <= prev.Last.Key[0] && len(cur.First.Key[0]) <= len(prev.Last.Key[0]) {
			t.Fatalf("file %d starts at %v, not after %v", i, cur.First.Key, prev.Last.Key)
		}
	}
}

func TestMicrosecondIntervalEdges(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES
		(1, '2026-03-01 10:00:00.999999+00', 'before', 1),
		(2, '2026-03-01 10:00:01.000000+00', 'at from', 1),
		(3, '2026-03-01 10:00:01.000001+00', 'after from', 1),
		(4, '2026-03-01 10:00:01.999999+00', 'before to', 1),
		(5, '2026-03-01 10:00:02.000000+00', 'at to', 1)`)
	opts := l.options()
	opts.WindowStart, opts.WindowEnd = "2026-03-01 10:00:01+00", "2026-03-01 10:00:02+00"
	res := l.mustExport(opts)
	if res.Commit.Watermark != nil {
		t.Fatalf("a backfill moved the watermark to %s", *res.Commit.Watermark)
	}
	got := l.query("SELECT id, updated_at FROM lake ORDER BY id")
	want := [][]string{{"2", "2026-03-01 10:00:01"}, {"3", "2026-03-01 10:00:01.000001"}, {"4", "2026-03-01 10:00:01.999999"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if f := res.Commit.Added[0]; *f.MinModifiedAt != "2026-03-01 10:00:01.000000+00" || *f.MaxModifiedAt != "2026-03-01 10:00:01.999999+00" {
		t.Fatalf("min/max modified-at %s %s", *f.MinModifiedAt, *f.MaxModifiedAt)
	}
}

func TestLateCommitCaughtByLookback(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'early', 1)`)
	opts := l.options()
	opts.Lookback = 10 * time.Second
	l.mustExport(opts)

	// A writer stamps its row with now(), the start of its transaction,
	// but commits only after the next export sampled its upper bound.
	conn := l.connect()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `INSERT INTO items VALUES (2, now(), 'late', 1)`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	res := l.mustExport(opts) // does not see row 2: not committed yet
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res.Commit.Metrics.RowsTransferred != 1 { // row 1 again, in the lookback
		t.Fatalf("second run read %d rows", res.Commit.Metrics.RowsTransferred)
	}
	res = l.mustExport(opts)
	if got := l.query("SELECT count(*) FROM lake WHERE id = 2"); scalar(t, got) != "1" {
		t.Fatalf("the late row was missed (third run read %d rows)", res.Commit.Metrics.RowsTransferred)
	}
	if res.Commit.Metrics.RowsInLookback == 0 {
		t.Fatalf("the late row should count in the lookback: %+v", res.Commit.Metrics)
	}
}

func TestRowUpdatedMidRunKeepsBothVersions(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 second', 'v1', 1 FROM generate_series(1, 1000) g`)
	opts := l.options()
	opts.PageRows = 50
	pages := 0
	opts.Failpoint = func(name string) {
		// The first page of a first run reads the NULL-stamped rows; row 1
		// is read on the second, then moves ahead of the cursor.
		if name == "after-page" {
			if pages++; pages == 2 {
				l.exec(`UPDATE items SET updated_at = '2026-01-01'::timestamptz + interval '900.5 seconds', name = 'v2' WHERE id = 1`)
			}
		}
	}
	res := l.mustExport(opts)
	if res.Commit.Metrics.RowsTransferred != 1001 {
		t.Fatalf("read %d rows, want 1001", res.Commit.Metrics.RowsTransferred)
	}
	got := l.query("SELECT name, updated_at FROM lake WHERE id = 1 ORDER BY updated_at")
	want := [][]string{{"v1", "2026-01-01 00:00:01"}, {"v2", "2026-01-01 00:15:00.5"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("versions of id 1: got %v, want %v", got, want)
	}
}

func TestCompositeBigintKeysResumeExactly(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (
		tenant_id bigint, id bigint, updated_at timestamptz, payload text,
		PRIMARY KEY (tenant_id, id))`,
		// Keys above 2^53, where a float64 would lose the last digits.
		`INSERT INTO items SELECT t, 9007199254740993 + g * 2, '2026-02-01 00:00:00+00', md5(g::text) || md5(t::text || g::text)
		 FROM generate_series(1, 3) t, generate_series(0, 999) g`)
	opts := l.options()
	opts.Source.PrimaryKey = []string{"tenant_id", "id"}
	opts.PageRows = 97
	opts.TargetFileBytes = 16 << 10
	opts.RowGroupBytes = 4 << 10
	l.exportCrashing(opts, "after-checkpoint", 2)
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("a crashed run committed seq %d", st.Seq)
	}
	res := l.mustExport(opts)
	if !res.Resumed {
		t.Fatal("the second attempt did not resume the run")
	}
	if res.Commit.Added[0].Key[:len("data/"+res.Plan.RunID)] != "data/"+res.Plan.RunID {
		t.Fatalf("unexpected key %s", res.Commit.Added[0].Key)
	}
	got := l.query("SELECT count(*), count(DISTINCT (tenant_id, id)), max(id)::varchar, sum(id % 1000)::varchar FROM lake")[0]
	want := l.pgQuery("SELECT count(*), count(DISTINCT (tenant_id, id)), max(id)::text, sum(id % 1000)::text FROM items")[0]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lake %v, source %v", got, want)
	}
	// The resumed attempt continued after the second checkpoint: the first
	// two files came from the dead attempt.
	attempts := map[string]bool{}
	for _, f := range res.Commit.Added {
		attempts[strings.Split(f.Key, "/")[2]] = true
	}
	if len(attempts) != 2 {
		t.Fatalf("files of %d attempts, want 2: %v", len(attempts), attempts)
	}
	// The last key of the chain resumed exactly: a key above 2^53 in text.
	if k := res.Commit.Added[1].Last.Key[1]; !strings.HasPrefix(k, "90071992547") {
		t.Fatalf("last key %q", k)
	}
}

func TestRetryReusesPlannedUpperBound(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items VALUES (1, now(), 'a', 1)`)
	opts := l.options()
	l.exportCrashing(opts, "after-plan", 1)
	time.Sleep(20 * time.Millisecond)
	l.exec(`INSERT INTO items VALUES (2, clock_timestamp(), 'after the plan', 1)`)
	res := l.mustExport(opts)
	if !res.Resumed {
		t.Fatal("did not resume")
	}
	if got := l.query("SELECT string_agg(id::varchar, ',' ORDER BY id) FROM lake"); scalar(t, got) != "1" {
		t.Fatalf("the retry read beyond its plan's upper bound: %v", got)
	}
	res = l.mustExport(opts)
	if res.Resumed {
		t.Fatal("a committed run was resumed")
	}
	if got := l.query("SELECT string_agg(id::varchar, ',' ORDER BY id) FROM lake"); scalar(t, got) != "1,2" {
		t.Fatalf("the next run missed row 2: %v", got)
	}
}

func TestNaiveTimestampInNonUTCDatabase(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id int PRIMARY KEY, updated_at timestamp, name text)`)
	db := l.pgQuery("SELECT current_database()")[0][0]
	l.exec(fmt.Sprintf(`ALTER DATABASE %s SET TimeZone = 'America/New_York'`, db))
	l.exec(`INSERT INTO items VALUES (1, localtimestamp, 'first')`) // a new session, in New York
	opts := l.options()
	res := l.mustExport(opts)
	if res.Commit.Identity.TimeZone != "America/New_York" {
		t.Fatalf("identity time zone %q", res.Commit.Identity.TimeZone)
	}
	// New York is behind UTC: an upper bound taken in UTC would lie hours
	// ahead of the writers' local stamps, and this row would be skipped.
	l.exec(`INSERT INTO items VALUES (2, localtimestamp, 'second')`)
	l.mustExport(opts)
	if got := l.query("SELECT count(DISTINCT id) FROM lake"); scalar(t, got) != "2" {
		t.Fatalf("lake has %v distinct ids", got)
	}
	got := l.query("SELECT updated_at FROM lake WHERE id = 2 LIMIT 1")[0][0]
	want := l.pgQuery("SELECT to_char(updated_at, 'YYYY-MM-DD HH24:MI:SS.US') FROM items WHERE id = 2")[0][0]
	if strings.TrimRight(strings.TrimRight(want, "0"), ".") != got && want != got {
		t.Fatalf("naive timestamp %s in the lake, %s in the source", got, want)
	}
}

func TestRacingExportsExactlyOneCommits(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'x', 1 FROM generate_series(1, 100) g`)
	opts := l.options()
	l.mustExport(opts)

	// A plans and writes, then stalls before its commit while B commits.
	stalled, resume := make(chan struct{}), make(chan struct{})
	optsA := opts
	optsA.Failpoint = func(name string) {
		if name == "before-commit" {
			close(stalled)
			<-resume
		}
	}
	errA := make(chan error, 1)
	go func() {
		_, err := l.export(optsA)
		errA <- err
	}()
	<-stalled
	resB, errB := l.export(opts)
	close(resume)
	if errB != nil {
		t.Fatalf("B: %v", errB)
	}
	err := <-errA
	if !errors.Is(err, export.ErrRaceLost) {
		t.Fatalf("A: want ErrRaceLost, got %v", err)
	}
	st := l.state()
	if st.Seq != 2 || st.LastWatermarkSeq != resB.Commit.Seq {
		t.Fatalf("state after the race: seq %d", st.Seq)
	}
	for _, f := range st.Files {
		if !strings.HasPrefix(f.Key, "data/"+resB.Plan.RunID+"/") && st.Runs[strings.Split(f.Key, "/")[1]] == 0 {
			t.Fatalf("a file of the losing run is committed: %s", f.Key)
		}
	}
	if got := l.query("SELECT count(*) FROM lake"); scalar(t, got) != "100" {
		t.Fatalf("lake rows %v", got)
	}
}

func TestFullRefreshReplacesEarlierFiles(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'x', 1 FROM generate_series(1, 50) g`,
		`INSERT INTO items VALUES (51, NULL, 'no stamp', 1)`)
	opts := l.options()
	first := l.mustExport(opts)
	if first.Commit.Metrics.RowsNullModifiedAt != 1 || first.Commit.Metrics.RowsTransferred != 51 {
		t.Fatalf("first run should take the NULL-stamped row: %+v", first.Commit.Metrics)
	}
	l.exec(`UPDATE items SET name = 'y', updated_at = clock_timestamp() WHERE id <= 10`,
		`INSERT INTO items VALUES (52, NULL, 'unseen', 1)`)
	second := l.mustExport(opts)
	if second.Commit.Metrics.RowsNullModifiedAt != 2 {
		t.Fatalf("incremental run should count NULL-stamped rows: %+v", second.Commit.Metrics)
	}
	if len(second.Warnings) == 0 {
		t.Fatal("no warning about NULL-stamped rows")
	}
	before := len(l.state().Files)
	opts.FullRefresh = true
	res := l.mustExport(opts)
	if len(res.Commit.Removed) != before {
		t.Fatalf("full refresh removed %d of %d files", len(res.Commit.Removed), before)
	}
	st := l.state()
	if len(st.Files) != len(res.Commit.Added) {
		t.Fatalf("committed set has %d files, want only the refresh's %d", len(st.Files), len(res.Commit.Added))
	}
	got := l.query("SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE name = 'y') FROM lake")[0]
	if fmt.Sprint(got) != "[52 52 10]" {
		t.Fatalf("after full refresh: %v", got)
	}
}

func TestTenantPredicateIsBound(t *testing.T) {
	l := newLake(t, `CREATE TABLE items (id int, tenant text, updated_at timestamptz, PRIMARY KEY (tenant, id))`,
		`INSERT INTO items VALUES (1, 'acme', now()), (2, 'acme', now()), (1, $$o'hara"; DROP TABLE items; --$$, now())`)
	opts := l.options()
	opts.Source.PrimaryKey = []string{"tenant", "id"}
	opts.Source.TenantColumn = "tenant"
	evil := `o'hara"; DROP TABLE items; --`
	opts.Source.Tenant = &evil
	res := l.mustExport(opts)
	if res.Commit.Metrics.RowsTransferred != 1 {
		t.Fatalf("tenant run read %d rows", res.Commit.Metrics.RowsTransferred)
	}
	if got := l.pgQuery("SELECT count(*) FROM items"); got[0][0] != "3" {
		t.Fatal("the table was touched")
	}
	// Another tenant in the same model is refused: it would share a watermark.
	acme := "acme"
	opts.Source.Tenant = &acme
	if _, err := l.export(opts); !errors.Is(err, export.ErrIdentity) {
		t.Fatalf("want ErrIdentity, got %v", err)
	}
}

func TestSourceQueryWithQuotedIdentifiers(t *testing.T) {
	l := newLake(t, `CREATE SCHEMA "Sales Dept"`,
		`CREATE TABLE "Sales Dept"."Orders ü" ("Order ID" bigint PRIMARY KEY, "Updated""At" timestamptz, amount numeric(10,2))`,
		`INSERT INTO "Sales Dept"."Orders ü" SELECT g, now(), g FROM generate_series(1, 30) g`)
	opts := l.options()
	opts.Source = pgsource.Spec{Table: `"Sales Dept"."Orders ü"`, PrimaryKey: []string{"Order ID"}, ModifiedAt: `Updated"At`}
	opts.PageRows = 7
	if res := l.mustExport(opts); res.Commit.Metrics.RowsTransferred != 30 {
		t.Fatalf("table run read %d", res.Commit.Metrics.RowsTransferred)
	}
	l.model = "orders_q"
	opts.Model = l.model
	opts.Source = pgsource.Spec{Query: `SELECT "Order ID", "Updated""At", amount * 2 AS doubled FROM "Sales Dept"."Orders ü" WHERE amount > 10`,
		PrimaryKey: []string{"Order ID"}, ModifiedAt: `Updated"At`}
	res := l.mustExport(opts)
	if res.Commit.Metrics.RowsTransferred != 20 {
		t.Fatalf("query run read %d", res.Commit.Metrics.RowsTransferred)
	}
	if got := l.query(`SELECT sum(doubled::DECIMAL(18,2)) FROM lake`); scalar(t, got) != "820" {
		t.Fatalf("sum %v", got)
	}
}

func TestSourceQueryWithoutPushdownWarns(t *testing.T) {
	l := newLake(t, itemsTable, `INSERT INTO items SELECT g, now(), 'x', 1 FROM generate_series(1, 20) g`)
	opts := l.options()
	// A LIMIT at the top of the query keeps the outer predicates out of it.
	opts.Source = pgsource.Spec{Query: `SELECT * FROM items ORDER BY id LIMIT 1000`, PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
	res := l.mustExport(opts)
	if res.Commit.Metrics.RowsTransferred != 20 {
		t.Fatalf("read %d rows", res.Commit.Metrics.RowsTransferred)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "does not push") {
		t.Fatalf("no pushdown warning: %q", res.Warnings)
	}
	// A plain query is inlined: no warning.
	l.model = "plain"
	opts.Model = l.model
	opts.Source.Query = `SELECT id, updated_at, name FROM items`
	if res := l.mustExport(opts); strings.Contains(strings.Join(res.Warnings, "\n"), "does not push") {
		t.Fatalf("a pushed-down query was warned about: %q", res.Warnings)
	}
}

func TestResumeAfterSchemaChangeStartsAfresh(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 ms', md5(g::text) || md5((g*7)::text), 1 FROM generate_series(1, 3000) g`)
	opts := l.options()
	opts.PageRows = 200
	opts.TargetFileBytes = 16 << 10
	opts.RowGroupBytes = 4 << 10
	l.exportCrashing(opts, "after-checkpoint", 1)
	l.exec(`ALTER TABLE items ADD COLUMN note text DEFAULT 'n'`)
	res := l.mustExport(opts)
	if res.Resumed {
		t.Fatal("a run written under the old schema was resumed")
	}
	for _, f := range res.Commit.Added {
		if f.SchemaID != res.Commit.Schema.ID {
			t.Fatalf("file %s has schema %s, the commit %s", f.Key, f.SchemaID, res.Commit.Schema.ID)
		}
	}
	if got := l.query("SELECT count(*), count(DISTINCT id), count(note) FROM lake")[0]; fmt.Sprint(got) != "[3000 3000 3000]" {
		t.Fatalf("lake %v", got)
	}
}

func TestFailedReadCheckpointsNothingPartial(t *testing.T) {
	l := newLake(t, itemsTable,
		`INSERT INTO items SELECT g, '2026-01-01'::timestamptz + g * interval '1 ms', 'x', 1 FROM generate_series(1, 3000) g`)
	opts := l.options()
	opts.PageRows = 500
	// The last row appears twice: the run must fail there.
	opts.Source = pgsource.Spec{Query: `SELECT * FROM items UNION ALL SELECT * FROM items WHERE id = 3000`,
		PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
	if _, err := l.export(opts); !errors.Is(err, pgsource.ErrDuplicateKey) {
		t.Fatalf("want ErrDuplicateKey, got %v", err)
	}
	if ckpts := l.checkpoints(); len(ckpts) != 0 {
		t.Fatalf("the failed read left checkpointed files: %v", ckpts)
	}
	if st := l.state(); st.Seq != 0 {
		t.Fatalf("committed seq %d", st.Seq)
	}
}
