// Command dedupe benchmarks `highwater dedupe` against DuckDB on the lake
// users have: by default it loads a table into a throwaway PostgreSQL
// (internal/pgtest, or HIGHWATER_TEST_DATABASE_URL),
//
//	items(id bigint primary key, updated_at timestamptz, name text (50 characters), price numeric(12,2))
//
// with -rows rows (5,000,000), exports it with the real `highwater export`
// (defaults everywhere) into a local lake, updates -updates of them (every
// rows/updates-th id, 1,000,000) and exports again. Then, -repeat times
// (3) on a fresh copy of that lake, each side in its own process so that
// its peak RSS is its own (measured by /usr/bin/time, whose child starts
// from a fresh address space; rusage of a Go parent's child also counts
// the parent):
//
//   - highwater dedupe (default flags, --memory-limit as given);
//   - DuckDB (this program re-executed with -duckref) over the same files:
//     the newest version of each id by (updated_at, _hw_version), QUALIFY
//     row_number() = 1, ordered by id, written as zstd Parquet.
//
// The outputs are compared row for row: the same key set, and for each key
// the same hash of the whole winning row. Then an incremental round:
// -incr of the keys (10%) are updated and exported into the deduped lake,
// and highwater's second dedupe (only the touched buckets) is timed against
// DuckDB redoing the whole job over the same committed files.
//
// It prints every round, the medians and the ratios (DuckDB time /
// highwater time, highwater RSS / DuckDB RSS) with the load average.
// -lake synth writes a synthetic lake instead (internal/synth: shuffled ids,
// 64 MiB files), without PostgreSQL.
//
//	go run ./bench/dedupe [-lake real|synth] [-rows N] [-updates N] [-incr F] [-repeat N]
//	                      [-bin highwater] [-memory-limit SIZE] [-keep DIR]
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/manifest"
)

const (
	model = "items"
	mib   = 1 << 20
)

type config struct {
	lake     string
	rows     int
	updates  int
	incr     float64
	repeat   int
	bin      string
	memLimit string
	keep     string
	self     string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.lake, "lake", "real", "how the lake is built: `real` (highwater export from PostgreSQL) or synth (internal/synth)")
	flag.IntVar(&cfg.rows, "rows", 5_000_000, "rows of the table (of the first export)")
	flag.IntVar(&cfg.updates, "updates", 1_000_000, "rows updated, then exported again, before the first dedupe")
	flag.Float64Var(&cfg.incr, "incr", 0.1, "fraction of the keys updated and exported before the incremental dedupe (0: none)")
	flag.IntVar(&cfg.repeat, "repeat", 3, "rounds of each comparison; the medians are reported")
	flag.StringVar(&cfg.bin, "bin", "", "the highwater `binary` (default: built from ./cmd/highwater)")
	flag.StringVar(&cfg.memLimit, "memory-limit", "", "--memory-limit of highwater dedupe (default: its default)")
	flag.StringVar(&cfg.keep, "keep", "", "build the lake in this `dir`ectory and keep it (default: a temporary one)")
	duckref := flag.String("duckref", "", "internal: run the DuckDB side: `out.parquet` then the input files")
	verify := flag.String("verify", "", "internal: compare two outputs: `a.parquet` then the files of b")
	synthStep := flag.String("synth", "", "internal: write the synthetic lake's `first` exports, or an incr one, into -keep")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *duckref != "":
		err = runDuck(*duckref, flag.Args())
	case *verify != "":
		err = runVerify(*verify, flag.Args())
	case *synthStep != "":
		err = writeSynth(ctx, cfg, *synthStep)
	default:
		err = bench(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/dedupe:", err)
		os.Exit(1)
	}
}

// lakeSource builds the lake: first writes the exports of the first
// dedupe, incr those of the incremental one, into a lake directory.
type lakeSource interface {
	first(ctx context.Context, lake string) error
	incr(ctx context.Context, lake string) error
	close()
}

func bench(ctx context.Context, cfg config) error {
	if cfg.repeat < 1 || cfg.rows < 1 || cfg.updates < 0 || cfg.incr < 0 || cfg.incr > 1 {
		return errors.New("-repeat and -rows must be positive, -updates at least 0, -incr within [0, 1]")
	}
	tmp, err := os.MkdirTemp("", "highwater-bench-dedupe-*")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	lake := filepath.Join(tmp, "lake")
	if cfg.keep != "" {
		lake = cfg.keep
	}
	if err := os.MkdirAll(lake, 0o755); err != nil {
		return fmt.Errorf("create lake dir: %w", err)
	}
	if cfg.self, err = os.Executable(); err != nil {
		return fmt.Errorf("find this program: %w", err)
	}
	if cfg.bin == "" {
		cfg.bin = filepath.Join(tmp, "highwater")
		build := exec.Command("go", "build", "-o", cfg.bin, "./cmd/highwater")
		if build.Dir, err = moduleRoot(); err != nil {
			return err
		}
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build highwater: %w\n%s", err, out)
		}
	} else if cfg.bin, err = filepath.Abs(cfg.bin); err != nil {
		return err
	}
	if _, err := exec.LookPath(timeBin); err != nil {
		fmt.Printf("%s not found: peak RSS is the child's rusage, which also counts this program's RSS\n", timeBin)
	}
	var src lakeSource
	switch cfg.lake {
	case "real":
		src, err = startPG(ctx, cfg)
	case "synth":
		src = synthSource{cfg}
	default:
		err = fmt.Errorf("-lake %q is not real or synth", cfg.lake)
	}
	if err != nil {
		return err
	}
	defer src.close()

	start := time.Now()
	if err := src.first(ctx, lake); err != nil {
		return err
	}
	fmt.Printf("lake (%s): %s, built in %.1fs\n", cfg.lake, describe(ctx, lake), time.Since(start).Seconds())
	first, err := compare(ctx, cfg, tmp, lake, "first dedupe")
	if err != nil {
		return err
	}
	results := []comparison{first}
	if cfg.incr > 0 {
		start = time.Now()
		if err := src.incr(ctx, lake); err != nil {
			return err
		}
		fmt.Printf("lake after a dedupe and %.0f%% of the keys updated: %s, exported in %.1fs\n", 100*cfg.incr, describe(ctx, lake), time.Since(start).Seconds())
		second, err := compare(ctx, cfg, tmp, lake, "incremental dedupe")
		if err != nil {
			return err
		}
		results = append(results, second)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nload average: %s", load)
	fmt.Printf("medians of %d rounds (%s lake, %d rows, %d updated; incremental: %.0f%% of the keys):\n", cfg.repeat, cfg.lake, cfg.rows, cfg.updates, 100*cfg.incr)
	for _, c := range results {
		c.print()
	}
	return nil
}

// describe names the committed files of the lake.
func describe(ctx context.Context, lake string) string {
	st, err := readState(ctx, lake)
	if err != nil {
		return err.Error()
	}
	var bytes, rows int64
	for _, f := range st.Files {
		bytes += f.Bytes
		rows += f.Rows
	}
	return fmt.Sprintf("%d rows committed in %d files, %.1f MiB", rows, len(st.Files), float64(bytes)/mib)
}

func readState(ctx context.Context, lake string) (*manifest.State, error) {
	d, err := destination.Open(ctx, "file://"+lake, "")
	if err != nil {
		return nil, fmt.Errorf("open lake: %w", err)
	}
	defer d.Close()
	st, err := manifest.NewLog(d, model).ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	return st, nil
}

func committedPaths(ctx context.Context, lake string) ([]string, error) {
	st, err := readState(ctx, lake)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range st.Files {
		paths = append(paths, filepath.Join(lake, model, filepath.FromSlash(f.Key)))
	}
	return paths, nil
}

// run is one measured process.
type run struct {
	wall, cpu time.Duration
	rss       int64
}

type comparison struct {
	name       string
	hw, duck   []run
	rows       int64
	timeRatios []float64
	rssRatios  []float64
}

func (c comparison) print() {
	hw, dk := medianRun(c.hw), medianRun(c.duck)
	fmt.Printf("  %s (%d rows out):\n", c.name, c.rows)
	// cpu/wall: the cores a side kept busy; on a loaded machine wall
	// times move with the neighbours, CPU times much less.
	fmt.Printf("    highwater dedupe: %7.2fs  (cpu %6.2fs, %.2f cores)  peak RSS %7.1f MiB\n", hw.wall.Seconds(), hw.cpu.Seconds(), hw.cpu.Seconds()/hw.wall.Seconds(), float64(hw.rss)/mib)
	fmt.Printf("    duckdb:           %7.2fs  (cpu %6.2fs, %.2f cores)  peak RSS %7.1f MiB\n", dk.wall.Seconds(), dk.cpu.Seconds(), dk.cpu.Seconds()/dk.wall.Seconds(), float64(dk.rss)/mib)
	fmt.Printf("    time ratio (duckdb/highwater, >=1: highwater at least as fast): %.2f (rounds %s)\n", median(c.timeRatios), list(c.timeRatios))
	fmt.Printf("    memory ratio (highwater/duckdb, target <=0.33):                 %.2f (rounds %s)\n", median(c.rssRatios), list(c.rssRatios))
}

// compare runs highwater's dedupe on a fresh copy of the lake and DuckDB
// on the lake's committed files, cfg.repeat times back to back, checks the
// outputs and leaves the lake deduped (the last round's copy).
func compare(ctx context.Context, cfg config, tmp, lake, name string) (comparison, error) {
	c := comparison{name: name}
	inputs, err := committedPaths(ctx, lake)
	if err != nil {
		return c, err
	}
	var work string
	for round := 1; round <= cfg.repeat; round++ {
		if work != "" {
			os.RemoveAll(work)
		}
		work = filepath.Join(tmp, fmt.Sprintf("work-%d", round))
		if out, err := exec.Command("cp", "-a", lake, work).CombinedOutput(); err != nil {
			return c, fmt.Errorf("copy the lake: %w\n%s", err, out)
		}
		args := []string{"dedupe", "--dest", "file://" + work, "--model", model, "--temp-dir", tmp}
		if cfg.memLimit != "" {
			args = append(args, "--memory-limit", cfg.memLimit)
		}
		hw, out, err := measure(ctx, cfg.bin, args...)
		if err != nil {
			return c, fmt.Errorf("highwater dedupe: %w", err)
		}
		if round == 1 {
			fmt.Printf("%s: highwater: %s", name, out)
		}
		duckOut := filepath.Join(tmp, "duck.parquet")
		dk, _, err := measure(ctx, cfg.self, append([]string{"-duckref", duckOut}, inputs...)...)
		if err != nil {
			return c, fmt.Errorf("duckdb: %w", err)
		}
		outputs, err := committedPaths(ctx, work)
		if err != nil {
			return c, err
		}
		_, out, err = measure(ctx, cfg.self, append([]string{"-verify", duckOut}, outputs...)...)
		if err != nil {
			return c, fmt.Errorf("verify: %w", err)
		}
		if c.rows, err = strconv.ParseInt(strings.Fields(out)[0], 10, 64); err != nil {
			return c, fmt.Errorf("verify printed %q", out)
		}
		os.Remove(duckOut)
		load, _ := os.ReadFile("/proc/loadavg")
		fmt.Printf("%s round %d: highwater %.2fs cpu %.2fs %.1f MiB; duckdb %.2fs cpu %.2fs %.1f MiB; %s; load %s",
			name, round, hw.wall.Seconds(), hw.cpu.Seconds(), float64(hw.rss)/mib, dk.wall.Seconds(), dk.cpu.Seconds(), float64(dk.rss)/mib,
			strings.TrimSpace(out), load)
		c.hw, c.duck = append(c.hw, hw), append(c.duck, dk)
		c.timeRatios = append(c.timeRatios, dk.wall.Seconds()/hw.wall.Seconds())
		c.rssRatios = append(c.rssRatios, float64(hw.rss)/float64(dk.rss))
	}
	// The deduped copy becomes the lake the next step builds on.
	if err := os.RemoveAll(lake); err != nil {
		return c, err
	}
	if err := os.Rename(work, lake); err != nil {
		return c, fmt.Errorf("keep the deduped lake: %w", err)
	}
	return c, nil
}

const timeBin = "/usr/bin/time"

// measure runs a command and returns its wall and CPU time, its peak RSS
// and its stdout. Under /usr/bin/time, the peak RSS is that of a child
// forked by a small C program, which starts small; the rusage of a Go
// program's child also counts the Go parent's RSS, since the child shares
// the parent's memory until it execs.
func measure(ctx context.Context, name string, args ...string) (run, string, error) {
	stats, err := os.CreateTemp("", "bench-time-*")
	if err != nil {
		return run{}, "", err
	}
	stats.Close()
	defer os.Remove(stats.Name())
	var cmd *exec.Cmd
	timed := false
	if _, err := exec.LookPath(timeBin); err == nil {
		cmd = exec.CommandContext(ctx, timeBin, append([]string{"-q", "-f", "%e %U %S %M", "-o", stats.Name(), name}, args...)...)
		timed = true
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return run{}, out.String(), err
	}
	r := run{wall: time.Since(start)}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.rss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	if timed {
		b, err := os.ReadFile(stats.Name())
		if err != nil {
			return r, out.String(), err
		}
		f := strings.Fields(string(b))
		if len(f) != 4 {
			return r, out.String(), fmt.Errorf("%s wrote %q", timeBin, b)
		}
		kb, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return r, out.String(), fmt.Errorf("%s wrote %q", timeBin, b)
		}
		r.rss = kb << 10
	}
	return r, out.String(), nil
}

func medianRun(rs []run) run {
	var wall, cpu, rss []float64
	for _, r := range rs {
		wall, cpu, rss = append(wall, float64(r.wall)), append(cpu, float64(r.cpu)), append(rss, float64(r.rss))
	}
	return run{wall: time.Duration(median(wall)), cpu: time.Duration(median(cpu)), rss: int64(median(rss))}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func list(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("find the module: run from inside the highwater checkout")
	}
	return filepath.Dir(mod), nil
}

func quoteList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = quote(p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// runDuck is the DuckDB side, in its own process: the newest version of
// each key, as highwater orders versions (then the later file and row).
func runDuck(out string, inputs []string) error {
	if len(inputs) == 0 {
		return fmt.Errorf("duckref: no input files")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	q := fmt.Sprintf(`COPY (SELECT * EXCLUDE (filename, file_row_number) FROM read_parquet(%s, filename = true, file_row_number = true)
		QUALIFY row_number() OVER (PARTITION BY id ORDER BY updated_at DESC, _hw_version DESC, filename DESC, file_row_number DESC) = 1
		ORDER BY id) TO %s (FORMAT parquet, COMPRESSION zstd)`, quoteList(inputs), quote(out))
	for _, s := range []string{"SET threads=2", "SET preserve_insertion_order=false", q} {
		if _, err := db.Exec(s); err != nil {
			return fmt.Errorf("duckdb %.40q: %w", s, err)
		}
	}
	return nil
}

// runVerify checks that DuckDB's output a and highwater's files hold the
// same keys, once each, and for each key the same row (a hash of all its
// columns), and prints the row count.
func runVerify(a string, files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("verify: highwater wrote no files")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	rows, err := db.Query(fmt.Sprintf("SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet(%s))", quote(a)))
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		cols = append(cols, `"`+strings.ReplaceAll(c, `"`, `""`)+`"`)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	h := "hash(" + strings.Join(cols, ", ") + ")"
	q := fmt.Sprintf(`WITH a AS (SELECT id, %[1]s AS h FROM read_parquet(%[2]s)), b AS (SELECT id, %[1]s AS h FROM read_parquet(%[3]s))
		SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b), (SELECT count(DISTINCT id) FROM b),
			(SELECT count(*) FROM a FULL JOIN b USING (id) WHERE a.h IS DISTINCT FROM b.h)`, h, quote(a), quoteList(files))
	var na, nb, keys, diff int64
	if err := db.QueryRow(q).Scan(&na, &nb, &keys, &diff); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if na != nb || keys != nb || diff != 0 {
		return fmt.Errorf("verify: duckdb has %d rows, highwater %d rows of %d keys; %d keys differ or are missing on one side", na, nb, keys, diff)
	}
	fmt.Printf("%d rows, the same keys and winning rows on both sides\n", na)
	return nil
}
