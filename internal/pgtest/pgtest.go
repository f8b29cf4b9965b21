// Package pgtest gives tests a real PostgreSQL: the server named by
// HIGHWATER_TEST_DATABASE_URL, or else a throwaway cluster started from the
// PostgreSQL server binaries. Every test gets a database of its own.
//
// A package's tests share one server through a Shared, which starts it on
// the first test that asks for it, and through Main in TestMain, which
// stops it after the tests. Tests that never ask (pure ones) therefore run
// on a machine with no PostgreSQL at all.
//
// The binaries are looked for in HIGHWATER_PG_BIN when it is set (and only
// there), else on PATH, else in /usr/lib/postgresql/*/bin. When none are
// found, a test that needs a server fails, naming what to install: a
// missing server must not pass unnoticed as a green run. Setting
// HIGHWATER_SKIP_PG=1 turns that failure into a skip that gives the
// reason, for machines that are meant to run the pure tests only. A
// server that is found but will not start always fails the test.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The environment variables that choose the server.
const (
	// EnvURL names an existing server to use instead of a throwaway cluster.
	EnvURL = "HIGHWATER_TEST_DATABASE_URL"
	// EnvBin names the directory of the server binaries (initdb, pg_ctl).
	EnvBin = "HIGHWATER_PG_BIN"
	// EnvSkip, set to 1, skips the tests that need a server when no
	// binaries are found, instead of failing them.
	EnvSkip = "HIGHWATER_SKIP_PG"
)

// ErrNoBinaries: no PostgreSQL server binaries were found, so no throwaway
// cluster can be started.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found")

// Server is a PostgreSQL server reachable by superuser.
type Server struct {
	// URL connects to the server's maintenance database as a superuser.
	URL   string
	dir   string // set when we started the cluster and must stop it
	bin   string
	runAs string
}

// Start returns the server of EnvURL, or starts a throwaway cluster.
func Start() (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Server{URL: u}, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "highwater-pg-*")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		s.runAs = "postgres"
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if out, err := s.run(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-o", serverOptions(port, dir), "-w", "start"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return s, nil
}

// serverOptions are the settings of every test cluster: fast and unsafe
// on a crash, with room for the tests' sessions.
func serverOptions(port int, socketDir string) string {
	return fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c max_prepared_transactions=10", port, socketDir)
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	if s.runAs != "" {
		args = append([]string{"-u", s.runAs, "--", name}, args...)
		name = "runuser"
	}
	return exec.Command(name, args...).CombinedOutput()
}

// Stop stops a cluster that Start began, and removes its files.
func (s *Server) Stop() {
	if s.dir == "" {
		return
	}
	s.run(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

// Restart stops and starts a cluster that Start began (for tests of a
// source that goes away mid-run).
func (s *Server) Restart() error {
	if s.dir == "" {
		return fmt.Errorf("restart: not a throwaway cluster")
	}
	// Without -l the server would inherit pg_ctl's output, and waiting for
	// that output to end would wait for the server to stop.
	out, err := s.run(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-m", "fast", "-w", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s", err, out)
	}
	return nil
}

// StartReplica starts a hot standby of a cluster that Start began, made
// by pg_basebackup -R and streaming from it. Stop it before s.
func (s *Server) StartReplica() (*Server, error) {
	if s.dir == "" {
		return nil, fmt.Errorf("start a replica: not a throwaway cluster")
	}
	primary, err := url.Parse(s.URL)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "highwater-pg-replica-*")
	if err != nil {
		return nil, err
	}
	r := &Server{dir: dir, bin: s.bin, runAs: s.runAs}
	if r.runAs != "" {
		u, err := user.Lookup(r.runAs)
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := r.run(filepath.Join(s.bin, "pg_basebackup"), "-D", data, "-R", "-X", "stream", "--no-sync", "--checkpoint=fast",
		"-h", primary.Hostname(), "-p", primary.Port(), "-U", "postgres"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A standby needs at least the primary's max_connections and
	// max_prepared_transactions: the same options.
	if out, err := r.run(filepath.Join(s.bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-o", serverOptions(port, dir), "-w", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		r.Stop()
		return nil, fmt.Errorf("pg_ctl start the replica: %w\n%s\n%s", err, out, log)
	}
	r.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return r, nil
}

// On returns the URL of the database that dbURL names, on server s: a
// primary's test database as its replica serves it.
func (s *Server) On(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	own, err := url.Parse(s.URL)
	if err != nil {
		return dbURL
	}
	u.Host = own.Host
	return u.String()
}

// CatchUp waits until replica s has replayed everything primary had
// written when CatchUp was called.
func (s *Server) CatchUp(ctx context.Context, primary *Server) error {
	p, err := pgx.Connect(ctx, primary.URL)
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	var lsn string
	if err := p.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	r, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	for {
		var done bool
		if err := r.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica did not replay up to %s: %w", lsn, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// NewDatabase creates a database for one test, runs the setup statements
// in it (as Exec) and returns its URL. It is dropped when the test ends.
func (s *Server) NewDatabase(t testing.TB, setup ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := s.DatabaseURL(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(setup) > 0 {
		Exec(t, u, setup...)
	}
	return u
}

// Exec runs SQL statements against a database URL, failing the test on error.
func Exec(t testing.TB, dbURL string, sql ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	for _, q := range sql {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("exec %q: %v", strings.TrimSpace(q), err)
		}
	}
}

func findBin() (string, error) {
	if dir := os.Getenv(EnvBin); dir != "" {
		for _, name := range []string{"initdb", "pg_ctl"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("%w in %s=%s: %w", ErrNoBinaries, EnvBin, dir, err)
			}
		}
		return dir, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return "", fmt.Errorf("%w on PATH or in /usr/lib/postgresql/*/bin: apt-get install postgresql, or set %s or %s", ErrNoBinaries, EnvURL, EnvBin)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Shared is the server of one test package, started by the first test
// that asks for it. The zero value is ready to use; Main stops it.
type Shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Server returns the package's server, starting it on the first call. A
// failure to start fails (or, by EnvSkip, skips) t and every later caller
// with the same error, without another attempt.
func (sh *Shared) Server(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() { sh.srv, sh.err = Start() })
	if sh.err != nil {
		unavailable(t, sh.err)
	}
	return sh.srv
}

// NewDatabase creates a database on the package's server for one test,
// starting the server if need be; see Server.NewDatabase.
func (sh *Shared) NewDatabase(t testing.TB, setup ...string) string {
	t.Helper()
	return sh.Server(t).NewDatabase(t, setup...)
}

// Stop stops the server if a test started it. A later Server call finds
// no server rather than starting one.
func (sh *Shared) Stop() {
	sh.once.Do(func() { sh.err = errors.New("pgtest: the package's server was already stopped") })
	if sh.srv != nil {
		sh.srv.Stop()
	}
}

// Own starts a throwaway cluster (or takes the server of EnvURL) for t
// alone, such as one the test restarts, and stops it when t ends.
func Own(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// unavailable ends a test that needs a server it cannot have.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinaries) && os.Getenv(EnvSkip) == "1" {
		t.Skipf("skipped by %s=1: this test needs PostgreSQL: %v", EnvSkip, err)
	}
	if errors.Is(err, ErrNoBinaries) {
		t.Fatalf("start PostgreSQL: %v (or set %s=1 to skip the tests that need it)", err, EnvSkip)
	}
	t.Fatalf("start PostgreSQL: %v", err)
}

// Main runs a package's tests and then stops the server, if one of them
// started it; it returns the exit code. Use it as TestMain's body:
// os.Exit(pgtest.Main(m, &pg)).
func Main(m *testing.M, sh *Shared) int {
	defer sh.Stop()
	return m.Run()
}
