package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// sourceFaultArgs make a 200k-row export read 200 pages and roll a file
// every few pages, so that it checkpoints files long before it ends and a
// fault can land in the middle of the read.
var sourceFaultArgs = []string{"--page-rows", "1000", "--target-file-size", "256KiB", "--row-group-size", "64KiB", "--lookback", "1s"}

const sourceFaultRows = 200_000

// TestSourceConnectionKilled terminates the export's PostgreSQL session
// once the run has checkpointed two files: the export must fail with one
// clear line, and a rerun must resume the same run and complete it.
func TestSourceConnectionKilled(t *testing.T) {
	db := itemsSetupOn(t, pg.Server(t), sourceFaultRows)
	sourceFault(t, db, func() error {
		// Every session of the binary connects with application_name
		// highwater; the test's own session is excluded by pid.
		conn, err := pgx.Connect(t.Context(), db)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		var n int
		err = conn.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = 'highwater' AND pid <> pg_backend_pid()) k`).Scan(&n)
		if err == nil && n == 0 {
			err = errors.New("no highwater session to terminate")
		}
		return err
	})
}

// TestSourceServerRestarted restarts the whole PostgreSQL server under a
// running export. Restart works only on a cluster the test started, so
// this test starts its own rather than disturb the shared one.
func TestSourceServerRestarted(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skipf("%s names an existing server, which the test may not restart", pgtest.EnvURL)
	}
	srv := pgtest.Own(t)
	db := itemsSetupOn(t, srv, sourceFaultRows)
	sourceFault(t, db, srv.Restart)
}

// sourceFault runs an export of db as a subprocess, calls fault once the
// run's second file checkpoint exists, and checks that the export fails
// cleanly, that a rerun resumes and commits the same run, and that the
// lake then equals the source.
func sourceFault(t *testing.T, db string, fault func() error) {
	t.Helper()
	s := fileStore(t)
	root := strings.TrimPrefix(s.url, "file://")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, exportArgs(db, s, sourceFaultArgs...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Poll for the second checkpoint: by then the run has a plan, has
	// read pages and made files durable, so the fault hits a run that
	// has something to resume from.
	runID, faulted := "", false
	for !faulted {
		select {
		case err := <-done:
			t.Fatalf("the export ended (%v) before it checkpointed two files; stderr:\n%s", err, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		m, _ := filepath.Glob(filepath.Join(root, "items", "_runs", "*", "ckpt-000002.json"))
		if len(m) == 0 {
			continue
		}
		runID = filepath.Base(filepath.Dir(m[0]))
		if err := fault(); err != nil {
			t.Fatalf("inject the fault: %v", err)
		}
		faulted = true
	}
	err := <-done
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if err == nil {
		// The run was too quick for the fault, or retried past it:
		// either way nothing was injected that the test can speak for.
		t.Fatalf("the export succeeded despite the fault: %s", r.stdout)
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	r.code = ee.ExitCode()
	faultsInjected.Add(1)
	sourceFaults.Add(1)
	last := r.lastLine()
	if r.code != 1 || !strings.HasPrefix(last, "highwater export: ") || !mentionsConnectionLoss(last) {
		t.Fatalf("exit %d; the last line of stderr does not say the connection was lost: %q", r.code, last)
	}
	t.Logf("export under the fault: exit %d: %s", r.code, last)

	// The rerun resumes: the commit carries the run id of the killed run.
	rr := hw(t, nil, exportArgs(db, s, sourceFaultArgs...)...)
	if rr.code != 0 {
		t.Fatalf("rerun: exit %d: %s", rr.code, rr.stderr)
	}
	if !strings.Contains(rr.stderr, `"resuming run"`) {
		t.Errorf("the rerun did not log that it resumed a run")
	}
	st := s.state(t, "items")
	if seq, ok := st.Runs[runID]; !ok || seq != 1 || st.Seq != 1 {
		t.Fatalf("the rerun did not commit the interrupted run %s as seq 1: runs %v, seq %d", runID, st.Runs, st.Seq)
	}
	compare(t, s, "items", db)
	if r := hw(t, nil, "verify", "--dest", s.url, "--model", "items"); r.code != 0 {
		t.Fatalf("verify: %s%s", r.stdout, r.stderr)
	}
}

// mentionsConnectionLoss reports whether an error line tells an operator
// that the database went away, in any of the words pgx and PostgreSQL use.
func mentionsConnectionLoss(line string) bool {
	l := strings.ToLower(line)
	for _, w := range []string{"terminat", "connection", "shutting down", "conn closed", "unexpected eof", "broken pipe", "connection reset"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// itemsSetupOn is itemsSetup on a given server.
func itemsSetupOn(t *testing.T, srv *pgtest.Server, n int) string {
	t.Helper()
	db := srv.NewDatabase(t)
	pgtest.Exec(t, db,
		`CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, payload text NOT NULL)`,
		`CREATE INDEX ON items (updated_at, id)`,
		fmt.Sprintf(`INSERT INTO items SELECT g, now() - interval '1 hour' + g * interval '1 ms',
			md5(g::text) || md5((g+1)::text) || md5((g+2)::text) FROM generate_series(1, %d) g`, n))
	return db
}
