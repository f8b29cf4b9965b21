// Command export-bench measures highwater's export against PostgreSQL's own
// COPY ... TO STDOUT (FORMAT binary), the fastest way to read the same rows
// in the same order. It prints figures; it asserts nothing.
//
// For each table size it:
//   - loads a table t(id bigint primary key, updated_at timestamptz,
//     payload text (50 characters), amount numeric(12,2)) with an index on
//     (updated_at, id) into a throwaway cluster;
//   - reads COPY (SELECT * FROM t ORDER BY updated_at, id) TO STDOUT
//     (FORMAT binary) into io.Discard, as the reference;
//   - runs `highwater export` (the real binary, as a subprocess) into a
//     file:// destination, and reports its wall time and peak RSS;
//   - runs the same command again: an incremental run that finds no change.
//
// Each figure is the fastest of -repeat rounds (the reference and the
// export timed back to back), since on a shared machine the slow runs
// measure the neighbours; peak RSS is the highest seen. It then sweeps
// --page-rows and --row-group-size at one size.
//
// With HIGHWATER_BENCH_CPUPROFILE=FILE (or -cpuprofile FILE) it also runs
// one export in-process through export.Run under runtime/pprof and writes
// the CPU profile to FILE (HIGHWATER_BENCH_MEMPROFILE=FILE adds an
// allocation profile); those runs are not timed against the reference.
//
// Then it measures a tenant fan-out (see measureTenants): -tenant-rows rows
// over -tenants tenants exported with --parallel -tenant-parallel from one
// config, against one export of the whole table, and the delete log (see
// measureDeletes): an incremental run with 1% of -delete-rows rows deleted
// against the same run with 1% updated.
//
// Usage: go run ./bench/export [-bin bin/highwater] [-sizes 1000000,5000000]
// [-repeat 3] [-sweep-rows 1000000]. With HIGHWATER_TEST_DATABASE_URL set,
// that server is used instead of a throwaway cluster, and -reuse keeps the
// tables loaded by an earlier run.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/memstat"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/jackc/pgx/v5"
)

const mib = 1 << 20

type config struct {
	bin         string
	sizes       []int
	sweepRows   int
	pageRows    []int
	rowGroups   []string
	repeat      int
	cpuProfile  string
	memProfile  string
	heapProfile string
	profileRows int
	profileOnly bool
	reuse       bool
	wideRows    int
	workDir     string
	tenants     tenantsConfig
	deletes     deletesConfig
}

func main() {
	var cfg config
	var sizes, pageRows, rowGroups string
	flag.StringVar(&cfg.bin, "bin", "bin/highwater", "the highwater `binary` to time")
	flag.StringVar(&sizes, "sizes", "1000000,5000000", "table sizes in rows, comma-separated")
	flag.IntVar(&cfg.sweepRows, "sweep-rows", 1_000_000, "table size of the --page-rows and --row-group-size sweeps (0: no sweep)")
	flag.StringVar(&pageRows, "page-rows", "10000,50000,200000", "--page-rows values to sweep")
	flag.StringVar(&rowGroups, "row-group-sizes", "8MiB,32MiB,128MiB", "--row-group-size values to sweep")
	flag.IntVar(&cfg.repeat, "repeat", 3, "time the reference and each export this many times and keep the fastest")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", os.Getenv("HIGHWATER_BENCH_CPUPROFILE"), "write a CPU profile of an in-process export to `file` (default $HIGHWATER_BENCH_CPUPROFILE)")
	flag.StringVar(&cfg.memProfile, "memprofile", os.Getenv("HIGHWATER_BENCH_MEMPROFILE"), "write an allocation profile of the in-process export to `file` (default $HIGHWATER_BENCH_MEMPROFILE)")
	flag.StringVar(&cfg.heapProfile, "heapprofile", os.Getenv("HIGHWATER_BENCH_HEAPPROFILE"), "write the in-use heap profile of the in-process export, taken when its live heap peaked, to `file` (default $HIGHWATER_BENCH_HEAPPROFILE)")
	flag.IntVar(&cfg.profileRows, "profile-rows", 0, "table size of the profiled export (default: the first size)")
	flag.BoolVar(&cfg.profileOnly, "profile-only", false, "only load the profile table and profile the export")
	flag.IntVar(&cfg.wideRows, "wide-rows", 20, "rows of 1-50 MiB values in the wide-row export (0: none)")
	flag.IntVar(&cfg.tenants.rows, "tenant-rows", 10_000_000, "rows of the tenant fan-out bench (0: none)")
	flag.IntVar(&cfg.tenants.tenants, "tenants", 1000, "tenants of the tenant fan-out bench")
	flag.IntVar(&cfg.tenants.parallel, "tenant-parallel", 8, "--parallel of the tenant fan-out bench")
	flag.BoolVar(&cfg.tenants.only, "tenants-only", false, "only run the tenant fan-out bench")
	flag.IntVar(&cfg.deletes.rows, "delete-rows", 1_000_000, "rows of the delete-log bench: an incremental run with 1% deleted against one with 1% updated (0: none)")
	flag.BoolVar(&cfg.deletes.only, "deletes-only", false, "only run the delete-log bench")
	flag.BoolVar(&cfg.reuse, "reuse", false, "with "+pgtest.EnvURL+", keep a table loaded by an earlier run (database bench_<rows>)")
	flag.Parse()
	var err error
	if cfg.sizes, err = intList(sizes); err != nil {
		fatal(fmt.Errorf("-sizes: %w", err))
	}
	if cfg.pageRows, err = intList(pageRows); err != nil {
		fatal(fmt.Errorf("-page-rows: %w", err))
	}
	cfg.rowGroups = splitList(rowGroups)
	if cfg.profileRows == 0 && len(cfg.sizes) > 0 {
		cfg.profileRows = cfg.sizes[0]
	}
	if cfg.bin, err = filepath.Abs(cfg.bin); err != nil {
		fatal(err)
	}
	if _, err := os.Stat(cfg.bin); err != nil && !cfg.profileOnly {
		fatal(fmt.Errorf("%s: %w (build it with `make build`)", cfg.bin, err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "export-bench:", err)
	os.Exit(1)
}

func run(ctx context.Context, cfg config) error {
	work, err := os.MkdirTemp("", "highwater-bench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cfg.workDir = work

	fmt.Printf("highwater export bench: %s, GOMAXPROCS %d, %d CPUs\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())
	t0 := time.Now()
	srv, err := pgtest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := tune(ctx, srv); err != nil {
		return err
	}
	fmt.Printf("cluster ready in %.1fs\n", time.Since(t0).Seconds())

	if cfg.tenants.only {
		return measureTenants(ctx, cfg, srv)
	}
	if cfg.deletes.only {
		return measureDeletes(ctx, cfg, srv)
	}
	if cfg.profileOnly {
		db, err := loadTable(ctx, srv, cfg.profileRows, cfg.reuse)
		if err != nil {
			return err
		}
		return profile(ctx, cfg, db, cfg.profileRows)
	}

	dbs := map[int]string{}
	db := func(n int) (string, error) {
		if u, ok := dbs[n]; ok {
			return u, nil
		}
		u, err := loadTable(ctx, srv, n, cfg.reuse)
		if err == nil {
			dbs[n] = u
		}
		return u, err
	}

	var results []sizeResult
	for _, n := range cfg.sizes {
		u, err := db(n)
		if err != nil {
			return err
		}
		r, err := measureSize(ctx, cfg, u, n)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	var sweep []sweepResult
	if cfg.sweepRows > 0 && (len(cfg.pageRows) > 0 || len(cfg.rowGroups) > 0) {
		u, err := db(cfg.sweepRows)
		if err != nil {
			return err
		}
		if sweep, err = runSweep(ctx, cfg, u, cfg.sweepRows); err != nil {
			return err
		}
	}
	report(results, sweep, cfg)
	if cfg.wideRows > 0 {
		if err := measureWide(ctx, cfg, srv, cfg.wideRows); err != nil {
			return err
		}
	}
	if cfg.tenants.rows > 0 {
		if err := measureTenants(ctx, cfg, srv); err != nil {
			return err
		}
	}
	if cfg.deletes.rows > 0 {
		if err := measureDeletes(ctx, cfg, srv); err != nil {
			return err
		}
	}
	if cfg.cpuProfile != "" {
		u, err := db(cfg.profileRows)
		if err != nil {
			return err
		}
		if err := profile(ctx, cfg, u, cfg.profileRows); err != nil {
			return err
		}
	}
	return nil
}

// tune gives the throwaway cluster settings of a modest production server
// (2 cores, 24 GiB here). A server named by HIGHWATER_TEST_DATABASE_URL is
// used as it is.
func tune(ctx context.Context, srv *pgtest.Server) error {
	if os.Getenv(pgtest.EnvURL) != "" {
		fmt.Printf("using %s as it is configured\n", pgtest.EnvURL)
		return nil
	}
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		return err
	}
	for _, s := range []string{
		"shared_buffers = '256MB'",
		"effective_cache_size = '8GB'",
		"work_mem = '64MB'",
		"maintenance_work_mem = '1GB'",
		"max_wal_size = '8GB'",
		"checkpoint_timeout = '30min'",
		"random_page_cost = 1.1",
		"max_parallel_workers_per_gather = 0", // neither side of the comparison uses them
		"max_parallel_maintenance_workers = 2",
	} {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+s); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("alter system set %s: %w", s, err)
		}
	}
	var dataDir string
	err = conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir)
	conn.Close(ctx)
	if err != nil {
		return err
	}
	return restart(dataDir)
}

// restart restarts the cluster with its log in a file. (pgtest's Restart
// collects pg_ctl's output, and the restarted postmaster inherits that
// pipe, so it never returns.)
func restart(dataDir string) error {
	pgCtl, err := exec.LookPath("pg_ctl")
	if err != nil {
		m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
		if len(m) == 0 {
			return errors.New("pg_ctl not found")
		}
		pgCtl = m[len(m)-1]
	}
	args := []string{"-D", dataDir, "-l", filepath.Join(filepath.Dir(dataDir), "log"), "-m", "fast", "-w", "restart"}
	name := pgCtl
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres", "--", pgCtl}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil // no pipe for the postmaster to inherit
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_ctl restart: %w (see %s)", err, filepath.Join(filepath.Dir(dataDir), "log"))
	}
	return nil
}

// loadTable creates a database holding t with n rows and returns its URL.
// updated_at follows id with up to a minute of jitter, as in a table
// stamped on write, so that neither the index nor the heap is in perfect
// order.
func loadTable(ctx context.Context, srv *pgtest.Server, n int, reuse bool) (string, error) {
	t0 := time.Now()
	name := fmt.Sprintf("bench_%d", n)
	u, err := srv.DatabaseURL(name)
	if err != nil {
		return "", err
	}
	if reuse {
		if conn, err := pgx.Connect(ctx, u); err == nil {
			var got int
			err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&got)
			conn.Close(ctx)
			if err == nil && got == n {
				fmt.Printf("reusing the %d rows of database %s\n", n, name)
				return u, nil
			}
		}
	}
	if _, err := srv.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if err := load(ctx, conn,
		`SET synchronous_commit = off`,
		`SET maintenance_work_mem = '1GB'`,
		`CREATE TABLE t (id bigint NOT NULL, updated_at timestamptz NOT NULL, payload text NOT NULL, amount numeric(12,2))`,
		fmt.Sprintf(`INSERT INTO t
SELECT g,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '10 ms' + (random() * 60000)::int * interval '1 ms',
       md5(g::text) || left(md5((g * 7)::text), 18),
       round((random() * 100000000)::numeric, 2)
FROM generate_series(1, %d) AS g`, n),
		`ALTER TABLE t ADD PRIMARY KEY (id)`,
		`CREATE INDEX t_updated_at_id ON t (updated_at, id)`,
		`VACUUM (ANALYZE) t`,
		`CHECKPOINT`,
	); err != nil {
		return "", fmt.Errorf("load %d rows: %w", n, err)
	}
	var size string
	if err := conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('t'))`).Scan(&size); err != nil {
		return "", err
	}
	fmt.Printf("loaded %d rows in %.1fs (table and indexes: %s)\n", n, time.Since(t0).Seconds(), size)
	return u, nil
}

type sizeResult struct {
	rows          int
	copyTime      time.Duration
	exportTime    time.Duration
	exportRSS     int64 // bytes, ru_maxrss
	exportHWM     int64 // bytes, sampled VmHWM
	noChangeTime  time.Duration
	noChangeRSS   int64
	noChangeHWM   int64
	outBytes      int64
	files         int
	exportUserCPU time.Duration
	exportSysCPU  time.Duration
	// The server's CPU time (pgtest.ServerCPU), the least of the rounds: COPY's
	// and the export's.
	copyServerCPU, exportServerCPU time.Duration
}

func measureSize(ctx context.Context, cfg config, dbURL string, n int) (sizeResult, error) {
	r := sizeResult{rows: n}
	// A first COPY warms the caches for both contenders. Then each round
	// times the reference and the export back to back, and the fastest of
	// each is kept: on a shared machine the slow runs measure the
	// neighbours.
	if _, err := copyReference(ctx, dbURL); err != nil {
		return r, err
	}
	scpu, err := pgtest.NewServerCPU(ctx, dbURL)
	if err != nil {
		return r, err
	}
	defer scpu.Close(context.WithoutCancel(ctx))
	for i := 0; i < max(cfg.repeat, 1); i++ {
		s0, err := scpu.Reaped(ctx)
		if err != nil {
			return r, err
		}
		ct, err := copyReference(ctx, dbURL)
		if err != nil {
			return r, err
		}
		s1, err := scpu.Reaped(ctx)
		if err != nil {
			return r, err
		}
		fmt.Printf("[%d rows] COPY binary to nothing: %.2fs, %.0f rows/s, server CPU %.2fs\n", n, ct.Seconds(), rate(n, ct), (s1 - s0).Seconds())
		if i == 0 || ct < r.copyTime {
			r.copyTime = ct
		}
		if i == 0 || s1-s0 < r.copyServerCPU {
			r.copyServerCPU = s1 - s0
		}
		dest := filepath.Join(cfg.workDir, fmt.Sprintf("dest-%d-%d", n, i))
		full, err := runExport(ctx, cfg.bin, dbURL, dest, n)
		if err != nil {
			return r, err
		}
		s2, err := scpu.Reaped(ctx)
		if err != nil {
			return r, err
		}
		fmt.Printf("[%d rows] export: %.2fs, %.0f rows/s, peak RSS %.1f MiB (VmHWM %.1f MiB), user %.2fs sys %.2fs, server CPU %.2fs\n",
			n, full.wall.Seconds(), rate(n, full.wall), float64(full.maxRSS)/mib, float64(full.hwm)/mib, full.user.Seconds(), full.sys.Seconds(), (s2 - s1).Seconds())
		if i == 0 || s2-s1 < r.exportServerCPU {
			r.exportServerCPU = s2 - s1
		}
		if i == 0 || full.wall < r.exportTime {
			r.exportTime, r.exportUserCPU, r.exportSysCPU = full.wall, full.user, full.sys
			r.outBytes, r.files = dirSize(dest)
		}
		// RSS does not depend on the neighbours: keep the highest.
		r.exportRSS, r.exportHWM = max(r.exportRSS, full.maxRSS), max(r.exportHWM, full.hwm)
		again, err := runExport(ctx, cfg.bin, dbURL, dest, 0)
		if err != nil {
			return r, err
		}
		fmt.Printf("[%d rows] no-change run: %.3fs, peak RSS %.1f MiB (VmHWM %.1f MiB)\n",
			n, again.wall.Seconds(), float64(again.maxRSS)/mib, float64(again.hwm)/mib)
		if i == 0 || again.wall < r.noChangeTime {
			r.noChangeTime = again.wall
		}
		r.noChangeRSS, r.noChangeHWM = max(r.noChangeRSS, again.maxRSS), max(r.noChangeHWM, again.hwm)
		os.RemoveAll(dest)
	}
	return r, nil
}

// copyReference reads the table in export order in PostgreSQL's binary COPY
// format and throws it away.
func copyReference(ctx context.Context, dbURL string) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	t0 := time.Now()
	if _, err := conn.PgConn().CopyTo(ctx, io.Discard, `COPY (SELECT * FROM t ORDER BY updated_at, id) TO STDOUT (FORMAT binary)`); err != nil {
		return 0, fmt.Errorf("reference COPY: %w", err)
	}
	return time.Since(t0), nil
}

type exportRun struct {
	wall time.Duration
	// maxRSS is the child's rusage ru_maxrss. Linux folds the RSS of the
	// address space the child had before exec, which for a Go parent is the
	// parent's own (vfork shares it), so it never reads below this bench's
	// RSS. hwm is VmHWM of the child's own address space, sampled every
	// 20 ms: a lower bound that misses at most the last 20 ms.
	maxRSS    int64
	hwm       int64
	user, sys time.Duration
	rows      int64
}

var committedRE = regexp.MustCompile(`, (\d+) rows in (\d+) files`)

// runExport runs the highwater binary once; wantRows, when positive, is
// checked against the rows it reports, 0 wants none, and a negative value
// checks nothing.
func runExport(ctx context.Context, bin, dbURL, dest string, wantRows int, extra ...string) (exportRun, error) {
	args := append([]string{"export", "--source", dbURL, "--table", "public.t", "--primary-key", "id",
		"--modified-at", "updated_at", "--dest", "file://" + dest, "--model", "t"}, extra...)
	r, stdout, err := runBinary(ctx, bin, args...)
	if err != nil {
		return r, err
	}
	m := committedRE.FindStringSubmatch(stdout)
	if m == nil {
		return r, fmt.Errorf("highwater printed no commit line:\n%s", stdout)
	}
	r.rows, _ = strconv.ParseInt(m[1], 10, 64)
	if wantRows > 0 && r.rows != int64(wantRows) {
		return r, fmt.Errorf("highwater exported %d rows, want %d", r.rows, wantRows)
	}
	if wantRows == 0 && r.rows != 0 {
		return r, fmt.Errorf("the run after a full export read %d rows, want 0 (the lookback reaches no row)", r.rows)
	}
	return r, nil
}

// runBinary runs the highwater binary with args, sampling its VmHWM, and
// returns its resource use and what it printed on stdout.
func runBinary(ctx context.Context, bin string, args ...string) (exportRun, string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Start()
	var hwm int64
	if err == nil {
		stop := memstat.Sample(cmd.Process.Pid, 20*time.Millisecond) // see exportRun.hwm
		err = cmd.Wait()
		hwm = stop()
	}
	wall := time.Since(t0)
	if err != nil {
		return exportRun{}, "", fmt.Errorf("highwater %s: %w\n%s%s", args[0], err, tail(stdout.String(), 2000), tail(stderr.String(), 2000))
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r := exportRun{wall: wall, maxRSS: ru.Maxrss * 1024, hwm: hwm, user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano())}
	return r, stdout.String(), nil
}

type sweepResult struct {
	flag, value string
	wall        time.Duration
	maxRSS, hwm int64
	cpu         time.Duration
	outBytes    int64
	files       int
}

func runSweep(ctx context.Context, cfg config, dbURL string, n int) ([]sweepResult, error) {
	var out []sweepResult
	// Each setting runs cfg.repeat times: the fastest wall time and its CPU
	// time are kept, and the highest peak RSS.
	one := func(flag, value string) error {
		var best sweepResult
		for i := 0; i < max(cfg.repeat, 1); i++ {
			dest := filepath.Join(cfg.workDir, fmt.Sprintf("sweep-%s-%s", strings.TrimPrefix(flag, "--"), value))
			r, err := runExport(ctx, cfg.bin, dbURL, dest, n, flag, value)
			if err != nil {
				return err
			}
			size, files := dirSize(dest)
			os.RemoveAll(dest)
			fmt.Printf("[%d rows] %s %s: %.2fs, %.0f rows/s, peak RSS %.1f MiB (VmHWM %.1f MiB), CPU %.2fs, %d files, %.1f MiB\n",
				n, flag, value, r.wall.Seconds(), rate(n, r.wall), float64(r.maxRSS)/mib, float64(r.hwm)/mib, (r.user + r.sys).Seconds(), files, float64(size)/mib)
			if i == 0 || r.wall < best.wall {
				best.wall, best.cpu = r.wall, r.user+r.sys
			}
			best.maxRSS, best.hwm = max(best.maxRSS, r.maxRSS), max(best.hwm, r.hwm)
			best.flag, best.value, best.outBytes, best.files = flag, value, size, files
		}
		out = append(out, best)
		return nil
	}
	for _, p := range cfg.pageRows {
		if err := one("--page-rows", strconv.Itoa(p)); err != nil {
			return out, err
		}
	}
	for _, g := range cfg.rowGroups {
		if err := one("--row-group-size", g); err != nil {
			return out, err
		}
	}
	return out, nil
}

func report(results []sizeResult, sweep []sweepResult, cfg config) {
	fmt.Println()
	fmt.Printf("== export vs COPY (FORMAT binary) to nothing (fastest of %d; highest RSS) ==\n", max(cfg.repeat, 1))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "rows\tCOPY s\tCOPY rows/s\texport s\texport rows/s\tratio\tmaxrss MiB\tVmHWM MiB\tno-change s\tno-change %\tParquet MiB\tfiles\tCPU user+sys s\tserver CPU s\tCOPY server CPU s\t")
	for _, r := range results {
		fmt.Fprintf(w, "%d\t%.2f\t%.0f\t%.2f\t%.0f\t%.2f\t%.1f\t%.1f\t%.3f\t%.1f%%\t%.1f\t%d\t%.2f\t%.2f\t%.2f\t\n",
			r.rows, r.copyTime.Seconds(), rate(r.rows, r.copyTime), r.exportTime.Seconds(), rate(r.rows, r.exportTime),
			r.copyTime.Seconds()/r.exportTime.Seconds(), float64(r.exportRSS)/mib, float64(r.exportHWM)/mib,
			r.noChangeTime.Seconds(), pct(r.noChangeTime, r.exportTime), float64(r.outBytes)/mib, r.files,
			(r.exportUserCPU + r.exportSysCPU).Seconds(), r.exportServerCPU.Seconds(), r.copyServerCPU.Seconds())
	}
	w.Flush()
	fmt.Println("targets: ratio >= 0.80; peak RSS <= 150 MiB and flat across sizes; no-change run <= 5% of the full export")
	for _, r := range results {
		fmt.Printf("  %d rows: ratio %.2f %s, RSS %.1f MiB %s, no-change %.1f%% %s\n", r.rows,
			r.copyTime.Seconds()/r.exportTime.Seconds(), verdict(r.copyTime.Seconds()/r.exportTime.Seconds() >= 0.8),
			float64(r.exportRSS)/mib, verdict(r.exportRSS <= 150*mib),
			pct(r.noChangeTime, r.exportTime), verdict(pct(r.noChangeTime, r.exportTime) <= 5))
	}
	if len(sweep) > 0 {
		fmt.Println()
		fmt.Printf("== sweep at %d rows (fastest of %d runs; highest RSS) ==\n", cfg.sweepRows, max(cfg.repeat, 1))
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "flag\tvalue\ts\trows/s\tCPU s\tmaxrss MiB\tVmHWM MiB\tfiles\tParquet MiB\t")
		for _, s := range sweep {
			fmt.Fprintf(w, "%s\t%s\t%.2f\t%.0f\t%.2f\t%.1f\t%.1f\t%d\t%.1f\t\n", s.flag, s.value, s.wall.Seconds(),
				rate(cfg.sweepRows, s.wall), s.cpu.Seconds(), float64(s.maxRSS)/mib, float64(s.hwm)/mib, s.files, float64(s.outBytes)/mib)
		}
		w.Flush()
	}
}

// profile runs one full export in-process under the CPU profiler.
func profile(ctx context.Context, cfg config, dbURL string, n int) error {
	if cfg.cpuProfile == "" {
		return errors.New("no -cpuprofile file given")
	}
	dir := filepath.Join(cfg.workDir, "profile-dest")
	src, err := pgsource.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer src.Close(context.WithoutCancel(ctx))
	d, err := destination.Open(ctx, "file://"+dir, "")
	if err != nil {
		return err
	}
	defer d.Close()
	f, err := os.Create(cfg.cpuProfile)
	if err != nil {
		return err
	}
	defer f.Close()
	if cfg.memProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	opts := export.Options{Model: "t", Lookback: watermark.DefaultLookback,
		Source: pgsource.Spec{Table: "public.t", PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}}
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	stopHeap := func() {}
	if cfg.heapProfile != "" {
		stopHeap = watchHeap(cfg.heapProfile)
	}
	t0 := time.Now()
	res, err := export.Run(ctx, src, d, d.ObjectURL, opts)
	wall := time.Since(t0)
	pprof.StopCPUProfile()
	stopHeap()
	if err != nil {
		return fmt.Errorf("profiled export: %w", err)
	}
	fmt.Printf("\nprofiled in-process export of %d rows: %.2fs (%.0f rows/s), %d rows; CPU profile in %s\n",
		n, wall.Seconds(), rate(n, wall), res.Commit.Metrics.RowsTransferred, cfg.cpuProfile)
	if cfg.memProfile != "" {
		mf, err := os.Create(cfg.memProfile)
		if err != nil {
			return err
		}
		defer mf.Close()
		if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
			return err
		}
		fmt.Printf("allocation profile in %s\n", cfg.memProfile)
	}
	fmt.Printf("read it with: go tool pprof -top -nodecount=30 %s\n", cfg.cpuProfile)
	return nil
}

// watchHeap writes the in-use heap profile to path each time the live
// heap (measured after a GC) reaches a new peak, until the returned func is
// called.
func watchHeap(path string) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var peak uint64
		var lastGC uint32
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Printf("peak live heap after a GC: %.1f MiB; in-use heap profile at that point in %s\n", float64(peak)/mib, path)
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.NumGC == lastGC {
				continue
			}
			lastGC = ms.NumGC
			// HeapAlloc soon after a GC approximates the live heap.
			if live := ms.HeapAlloc; live > peak {
				peak = live
				if f, err := os.Create(path); err == nil {
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func dirSize(dir string) (int64, int) {
	var size int64
	var files int
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if strings.HasSuffix(p, ".parquet") {
			files++
		}
		if info, err := e.Info(); err == nil {
			size += info.Size()
		}
		return nil
	})
	return size, files
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func pct(a, b time.Duration) float64 { return 100 * a.Seconds() / b.Seconds() }

func verdict(ok bool) string {
	if ok {
		return "(target met)"
	}
	return "(TARGET MISSED)"
}

func intList(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(strings.ReplaceAll(p, "_", ""))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// load runs the statements that fill a bench database, in order; an error
// names the statement by its first line.
func load(ctx context.Context, conn *pgx.Conn, stmts ...string) error {
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
