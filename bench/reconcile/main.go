// Command reconcile-bench measures highwater reconcile against a full
// export of the same table: it loads t(id bigint primary key, updated_at
// timestamptz, payload text (50 characters), amount numeric(12,2)) into a
// throwaway cluster, runs `highwater export` (the real binary, as a
// subprocess) into a file:// destination, then `highwater reconcile` of the
// same model, and prints each one's wall time, CPU time (user and system,
// of the child), the server's CPU time (its backends', pgtest.ServerCPU)
// and peak RSS (VmHWM of the child, sampled every 20 ms). It prints
// figures; it asserts nothing.
//
// The machine may be shared: -runs N alternates N full exports (each into
// a fresh destination) with N reconciles of the last one and prints every
// pair and the medians, so that both sides see the same load. CPU time is
// the steadier figure under load; wall time is the one the target is for.
//
// -cpuprofile FILE (default $HIGHWATER_BENCH_CPUPROFILE) also runs one
// more reconcile in a process that does nothing else (the reconcile
// memhelper, built here) under runtime/pprof.
//
// Usage: go run ./bench/reconcile [-bin bin/highwater] [-rows 5000000]
// [-memory-limit 128MiB] [-runs 1] [-cpuprofile FILE] [-reuse]. With
// HIGHWATER_TEST_DATABASE_URL set, that server is used instead of a
// throwaway cluster, and -reuse keeps its table t when it has -rows rows.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highwater-dev/highwater/internal/config"
	"github.com/highwater-dev/highwater/internal/memstat"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

const mib = 1 << 20

func main() {
	bin := flag.String("bin", "bin/highwater", "the highwater binary")
	rows := flag.Int("rows", 5_000_000, "rows of the table")
	limit := flag.String("memory-limit", "128MiB", "reconcile's --memory-limit")
	runs := flag.Int("runs", 1, "pairs of export and reconcile, alternated")
	reuse := flag.Bool("reuse", false, "with "+pgtest.EnvURL+", keep the table t of an earlier run when it has -rows rows")
	profile := flag.String("cpuprofile", os.Getenv("HIGHWATER_BENCH_CPUPROFILE"), "write a CPU profile of one more reconcile to `file` (default $HIGHWATER_BENCH_CPUPROFILE)")
	flag.Parse()
	if *rows <= 0 || *runs <= 0 {
		fmt.Fprintln(os.Stderr, "reconcile-bench: -rows and -runs must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *bin, *rows, *limit, *runs, *reuse, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "reconcile-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string, n int, limit string, runs int, reuse bool, profile string) error {
	work, err := os.MkdirTemp("", "highwater-bench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	srv, err := pgtest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		return err
	}
	var have int
	if reuse && conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&have) == nil && have == n {
		fmt.Printf("reusing the %d rows of t\n", n)
	} else if err := load(ctx, conn, n); err != nil {
		conn.Close(ctx)
		return err
	}
	conn.Close(ctx)
	return measureAll(ctx, srv, work, bin, n, limit, runs, profile)
}

// load fills t with n rows.
func load(ctx context.Context, conn *pgx.Conn, n int) error {
	t0 := time.Now()
	_, err := conn.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS t;
		CREATE TABLE t (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, payload text, amount numeric(12,2));
		INSERT INTO t SELECT g, '2026-01-01'::timestamptz + g * interval '1 ms', repeat(md5(g::text), 2)::varchar(50), g / 100.0
		FROM generate_series(1, %d) g;
		CREATE INDEX ON t (updated_at, id)`, n))
	if err == nil {
		_, err = conn.Exec(ctx, "VACUUM ANALYZE t")
	}
	if err != nil {
		return fmt.Errorf("load the table: %w", err)
	}
	fmt.Printf("loaded %d rows in %.1fs\n", n, time.Since(t0).Seconds())
	return nil
}

func measureAll(ctx context.Context, srv *pgtest.Server, work, bin string, n int, limit string, runs int, profile string) error {
	scpu, err := pgtest.NewServerCPU(ctx, srv.URL)
	if err != nil {
		return err
	}
	defer scpu.Close(context.WithoutCancel(ctx))
	var exps, recs []result
	var dest string
	for i := range runs {
		// A fresh destination each time, so that every export is a full one.
		dest = filepath.Join(work, fmt.Sprintf("lake-%d", i))
		model := []string{"--source", srv.URL, "--table", "public.t", "--primary-key", "id", "--modified-at", "updated_at",
			"--dest", "file://" + dest, "--model", "t"}
		exp, err := measure(ctx, scpu, bin, append([]string{"export"}, model...), 0)
		if err != nil {
			return err
		}
		rec, err := measure(ctx, scpu, bin, append(append([]string{"reconcile"}, model...), "--memory-limit", limit), 0)
		if err != nil {
			return err
		}
		fmt.Printf("run %d (load average %s): export %s; reconcile %s\n", i+1, loadAverage(), exp, rec)
		exps, recs = append(exps, exp), append(recs, rec)
	}
	exp, rec := median(exps), median(recs)
	fmt.Printf("%d rows, median of %d: export %s; reconcile %s under --memory-limit %s\n", n, runs, exp, rec, limit)
	fmt.Printf("reconcile / export: wall %.2f, cpu %.2f, server cpu %.2f; worst reconcile peak RSS %.1f MiB\n",
		rec.wall.Seconds()/exp.wall.Seconds(), rec.cpu.Seconds()/exp.cpu.Seconds(), rec.server.Seconds()/exp.server.Seconds(), float64(slices.MaxFunc(recs, func(a, b result) int { return int(a.hwm - b.hwm) }).hwm)/mib)
	fmt.Println("targets: reconcile no slower than the full export; peak RSS under 150 MiB")
	if profile != "" {
		return cpuProfile(ctx, srv.URL, "file://"+dest, limit, profile)
	}
	return nil
}

// cpuProfile runs one reconcile in the memhelper, a process that does
// nothing else, under runtime/pprof.
func cpuProfile(ctx context.Context, source, dest, limit, file string) error {
	bytes, err := config.ParseSize(limit)
	if err != nil {
		return err
	}
	helper := filepath.Join(filepath.Dir(dest[len("file://"):]), "memhelper")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", helper, "./reconcile/internal/memhelper").CombinedOutput(); err != nil {
		return fmt.Errorf("build the memhelper: %v\n%s", err, out)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, helper, source, dest, "t", "public.t", strconv.FormatInt(bytes, 10))
	cmd.Env = append(os.Environ(), "MEMHELPER_CPUPROFILE="+abs)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("profile a reconcile: %w", err)
	}
	fmt.Printf("CPU profile of a reconcile: %s (go tool pprof %s)\n", abs, abs)
	return nil
}

type result struct {
	wall, cpu time.Duration
	server    time.Duration // the server's CPU time
	hwm       int64
}

func (r result) String() string {
	return fmt.Sprintf("wall %.2fs, cpu %.2fs, server cpu %.2fs, peak RSS %.1f MiB", r.wall.Seconds(), r.cpu.Seconds(), r.server.Seconds(), float64(r.hwm)/mib)
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// median takes each figure's median on its own.
func median(rs []result) result {
	mid := func(get func(result) int64) int64 {
		v := make([]int64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{wall: time.Duration(mid(func(r result) int64 { return int64(r.wall) })),
		cpu:    time.Duration(mid(func(r result) int64 { return int64(r.cpu) })),
		server: time.Duration(mid(func(r result) int64 { return int64(r.server) })), hwm: mid(func(r result) int64 { return r.hwm })}
}

// measure runs the binary once; exit codes other than want fail.
func measure(ctx context.Context, scpu *pgtest.ServerCPU, bin string, args []string, want int) (result, error) {
	s0, err := scpu.Reaped(ctx)
	if err != nil {
		return result{}, fmt.Errorf("read the server's CPU time: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	stop := memstat.Sample(cmd.Process.Pid, 20*time.Millisecond)
	err = cmd.Wait()
	r := result{wall: time.Since(t0), hwm: stop(), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if code := cmd.ProcessState.ExitCode(); code != want {
		return r, fmt.Errorf("highwater %s: exit %d (%v)\n%s%s", args[0], code, err, stdout.String(), stderr.String())
	}
	s1, err := scpu.Reaped(ctx)
	if err != nil {
		return r, fmt.Errorf("read the server's CPU time: %w", err)
	}
	r.server = s1 - s0
	return r, nil
}
