package faults_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/jackc/pgx/v5"
)

var (
	pg  pgtest.Shared
	bin string // the highwater binary, built once

	// Tallies for the summary that TestMain prints.
	pointsTried    atomic.Int64
	faultsInjected atomic.Int64
	rowsCompared   atomic.Int64
	rowsLost       atomic.Int64
	storesTried    = map[string]bool{}
	// Source faults (a killed session, a restarted server) and the
	// proxy's injected faults by kind; both are in faultsInjected too.
	sourceFaults atomic.Int64
	proxyFaults  = map[string]int64{}
)

// TestMain builds the binary once (the fault tests kill real processes,
// which an in-process run cannot stand for) and stops PostgreSQL, which
// the first test that needs it starts.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "highwater-faults-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "highwater")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/highwater-dev/highwater/cmd/highwater").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "build highwater: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	var stores []string
	for s := range storesTried {
		stores = append(stores, s)
	}
	fmt.Printf("faults summary: failpoints tried %d, stores %v, source faults %d, proxy faults %v, faults injected %d, rows compared %d, rows lost %d\n",
		pointsTried.Load(), stores, sourceFaults.Load(), proxyFaults, faultsInjected.Load(), rowsCompared.Load(), rowsLost.Load())
	pg.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	code           int
	killed         bool // by SIGKILL (a failpoint)
	stdout, stderr string
}

// lastLine is what scripts read of stderr.
func (r result) lastLine() string {
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	return lines[len(lines)-1]
}

// hw runs the binary with extra environment variables.
func hw(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.killed = true
		}
	default:
		t.Fatalf("run highwater: %v", err)
	}
	return r
}

// store is a destination: a local directory, or a fresh bucket on the
// S3 test server.
type store struct {
	name string
	url  string
}

func fileStore(t *testing.T) store {
	return store{name: "file", url: "file://" + t.TempDir()}
}

// s3Store creates a bucket on versitygw, or skips when there is none or
// the binary cannot open s3:// destinations yet.
func s3Store(t *testing.T) store {
	t.Helper()
	ep := os.Getenv("HIGHWATER_TEST_S3_ENDPOINT")
	if ep == "" {
		t.Skip("HIGHWATER_TEST_S3_ENDPOINT is not set: run scripts/servers.sh start and source its env file")
	}
	return s3StoreAt(t, ep, ep)
}

// s3StoreAt creates a bucket through the server at ep and returns a
// destination that reaches it through via (a proxy, say).
func s3StoreAt(t *testing.T, ep, via string) store {
	t.Helper()
	t.Setenv(cloudtest.EnvS3, ep)
	return store{name: "s3", url: "s3://" + cloudtest.S3Bucket(t) + "/lake?endpoint=" + via}
}

// open opens the store for checks made outside the binary.
func (s store) open(t *testing.T) *destination.Destination {
	t.Helper()
	d, err := destination.Open(t.Context(), s.url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func (s store) state(t *testing.T, model string) *manifest.State {
	t.Helper()
	st, err := manifest.NewLog(s.open(t), model).ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lakeRows downloads the committed files of model and returns, per key,
// the newest version as "updated_at|payload", read by DuckDB; and the
// number of rows in the lake, before deduplication.
func (s store) lakeRows(t *testing.T, model string) (map[string]string, int) {
	t.Helper()
	d := s.open(t)
	log := manifest.NewLog(d, model)
	st := s.state(t, model)
	dir := t.TempDir()
	var paths []string
	for i, f := range st.Files {
		rc, err := d.Get(t.Context(), log.Key(f.Key))
		if err != nil {
			t.Fatalf("committed file %s: %v", f.Key, err)
		}
		p := filepath.Join(dir, fmt.Sprintf("%06d.parquet", i))
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(w, rc)
		rc.Close()
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, "'"+p+"'")
	}
	if len(paths) == 0 {
		return map[string]string{}, 0
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("read_parquet([%s], union_by_name = true)", strings.Join(paths, ","))
	var total int
	if err := db.QueryRow("SELECT count(*) FROM " + src).Scan(&total); err != nil {
		t.Fatal(err)
	}
	// The newest version of each key, left out when it is a tombstone;
	// ties on updated_at between two versions would be a bug of their own,
	// so they are counted.
	rows, err := db.Query(`SELECT id::VARCHAR, strftime(updated_at, '%Y-%m-%d %H:%M:%S.%f'), payload FROM (
		SELECT *, row_number() OVER (PARTITION BY id ORDER BY updated_at DESC, _hw_version DESC) AS rn FROM ` + src + `) WHERE rn = 1 AND NOT _hw_deleted`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, ts, payload string
		if err := rows.Scan(&id, &ts, &payload); err != nil {
			t.Fatal(err)
		}
		out[id] = ts + "|" + payload
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, total
}

// sourceRows reads the source table the same way.
func sourceRows(t *testing.T, db string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT id::text, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), payload FROM items`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, ts, payload string
		if err := rows.Scan(&id, &ts, &payload); err != nil {
			t.Fatal(err)
		}
		out[id] = ts + "|" + payload
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// compare checks the lake's newest versions against the source: every
// source row is there with its newest version, and nothing else is.
func compare(t *testing.T, s store, model, db string) {
	t.Helper()
	got, total := s.lakeRows(t, model)
	want := sourceRows(t, db)
	rowsCompared.Add(int64(len(want)))
	lost, stale, extra := 0, 0, 0
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			lost++
		case g != w:
			stale++
		}
		if (!ok || g != w) && lost+stale <= 3 {
			t.Errorf("key %s: lake has %q, source %q", id, g, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			extra++
		}
	}
	rowsLost.Add(int64(lost + stale))
	if lost+stale+extra > 0 {
		t.Fatalf("%d rows lost, %d stale, %d not in the source (lake holds %d rows for %d keys)", lost, stale, extra, total, len(got))
	}
}

// itemsSetup creates the table the fault tests export: n rows stamped in
// the past, with an incompressible payload so small target sizes roll
// several files.
func itemsSetup(t *testing.T, n int) string {
	t.Helper()
	return itemsSetupOn(t, pg.Server(t), n)
}

// exportArgs are the flags of an export of items to s.
func exportArgs(db string, s store, extra ...string) []string {
	return append([]string{"export", "--source", db, "--table", "public.items", "--primary-key", "id",
		"--modified-at", "updated_at", "--dest", s.url, "--model", "items"}, extra...)
}

// churn changes some rows, adds and stamps them with now(), as an
// application would between two runs.
func churn(t *testing.T, db string, round int) {
	t.Helper()
	pgtest.Exec(t, db,
		fmt.Sprintf(`UPDATE items SET updated_at = clock_timestamp(), payload = 'changed-%d-' || id WHERE id %% 97 = %d`, round, round%97),
		fmt.Sprintf(`INSERT INTO items SELECT max(id) + 1, clock_timestamp(), 'new-%d' FROM items`, round))
}

// execSQL is pgtest.Exec under a shorter name.
func execSQL(t *testing.T, db string, sql ...string) {
	t.Helper()
	pgtest.Exec(t, db, sql...)
}
