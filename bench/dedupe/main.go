// Command dedupe benchmarks `highwater dedupe` against DuckDB on the same
// committed export files.
//
// With no arguments it writes 5,000,000 rows of
// items(id bigint, updated_at timestamptz, name text(50), price numeric(12,2))
// plus 1,000,000 newer versions of existing ids as committed exports in a
// temporary local lake, then runs, each in its own process so that its peak
// RSS is its own:
//
//   - highwater dedupe (built from ./cmd/highwater, default --memory-limit);
//   - DuckDB (this program re-executed with -duckref) keeping the newest
//     version of each id, ordered by id, written as zstd Parquet.
//
// It prints each side's wall time and peak RSS and the ratios, and checks
// that both outputs hold the same rows.
//
//	go run ./bench/dedupe [-rows N] [-updates N] [-keep DIR] [-gen-only] [-memory-limit SIZE]
package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/synth"
	"github.com/highwater-dev/highwater/manifest"
)

const (
	model = "items"
	t0    = int64(1_767_225_600_000_000) // 2026-01-01 UTC in µs
)

func main() {
	var (
		rows     = flag.Int("rows", 5_000_000, "rows of the first export")
		updates  = flag.Int("updates", 1_000_000, "newer versions of existing ids, in a second export")
		keep     = flag.String("keep", "", "build the lake in this `dir`ectory and keep it (default: a temporary one)")
		genOnly  = flag.Bool("gen-only", false, "only write the lake")
		memLimit = flag.String("memory-limit", "", "--memory-limit of highwater dedupe (default: its default)")
		duckref  = flag.String("duckref", "", "internal: run the DuckDB side: `out.parquet` then the input files")
		verify   = flag.String("verify", "", "internal: compare two outputs: `a.parquet` then the files of b")
	)
	flag.Parse()
	var err error
	switch {
	case *duckref != "":
		err = runDuck(*duckref, flag.Args())
	case *verify != "":
		err = runVerify(*verify, flag.Args())
	default:
		err = bench(*rows, *updates, *keep, *genOnly, *memLimit)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/dedupe:", err)
		os.Exit(1)
	}
}

func bench(rows, updates int, keep string, genOnly bool, memLimit string) error {
	tmp, err := os.MkdirTemp("", "highwater-bench-dedupe-*")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	lakeDir := filepath.Join(tmp, "lake")
	if keep != "" {
		lakeDir = keep
	}
	if err := os.MkdirAll(lakeDir, 0o755); err != nil {
		return fmt.Errorf("create lake dir: %w", err)
	}
	url := "file://" + lakeDir
	ctx := context.Background()
	d, err := destination.Open(ctx, url, "")
	if err != nil {
		return fmt.Errorf("open lake: %w", err)
	}
	defer d.Close()

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program: %w", err)
	}
	start := time.Now()
	if genOnly {
		if err := generate(ctx, d, rows, updates); err != nil {
			return err
		}
	} else {
		// Generated in a child so that this process stays small: Go starts
		// children sharing the parent's memory until they exec, and their
		// Maxrss counts it.
		gen := exec.Command(self, "-gen-only", "-keep", lakeDir, "-rows", fmt.Sprint(rows), "-updates", fmt.Sprint(updates))
		gen.Stderr = os.Stderr
		if out, err := gen.Output(); err != nil {
			return fmt.Errorf("generate the lake: %w", err)
		} else {
			fmt.Print(string(out))
		}
	}
	st, err := manifest.NewLog(d, model).ReadState(ctx)
	if err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	var inputs []string
	var inBytes int64
	for _, f := range st.Files {
		inputs = append(inputs, filepath.Join(lakeDir, model, filepath.FromSlash(f.Key)))
		inBytes += f.Bytes
	}
	if genOnly {
		fmt.Printf("lake: %d rows + %d updates in %d files, %.1f MiB, written in %.1fs (%s)\n",
			rows, updates, len(inputs), float64(inBytes)/(1<<20), time.Since(start).Seconds(), lakeDir)
		return nil
	}

	hw := filepath.Join(tmp, "highwater")
	build := exec.Command("go", "build", "-o", hw, "./cmd/highwater")
	build.Dir, err = moduleRoot()
	if err != nil {
		return err
	}
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build highwater: %w\n%s", err, out)
	}
	args := []string{"dedupe", "--dest", url, "--model", model, "--temp-dir", tmp}
	if memLimit != "" {
		args = append(args, "--memory-limit", memLimit)
	}
	hwCmd := exec.Command(hw, args...)
	hwTime, hwRSS, hwOut, err := measure(hwCmd)
	if err != nil {
		return fmt.Errorf("highwater dedupe: %w", err)
	}
	fmt.Printf("highwater: %s", hwOut)
	hwCPU := lastCPU

	duckOut := filepath.Join(tmp, "duck.parquet")
	dkTime, dkRSS, _, err := measure(exec.Command(self, append([]string{"-duckref", duckOut}, inputs...)...))
	if err != nil {
		return fmt.Errorf("duckdb: %w", err)
	}
	dkCPU := lastCPU

	st, err = manifest.NewLog(d, model).ReadState(ctx)
	if err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	var outputs []string
	for _, f := range st.Files {
		outputs = append(outputs, filepath.Join(lakeDir, model, filepath.FromSlash(f.Key)))
	}
	if _, _, out, err := measure(exec.Command(self, append([]string{"-verify", duckOut}, outputs...)...)); err != nil {
		return fmt.Errorf("verify: %w", err)
	} else {
		fmt.Printf("verify: %s", out)
	}

	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average: %s", load)
	fmt.Printf("highwater dedupe: %7.2fs  (cpu %6.2fs)  peak RSS %7.1f MiB\n", hwTime.Seconds(), hwCPU.Seconds(), mib(hwRSS))
	fmt.Printf("duckdb:           %7.2fs  (cpu %6.2fs)  peak RSS %7.1f MiB\n", dkTime.Seconds(), dkCPU.Seconds(), mib(dkRSS))
	fmt.Printf("time ratio (duckdb/highwater, >=1: highwater at least as fast): %.2f\n", dkTime.Seconds()/hwTime.Seconds())
	fmt.Printf("memory ratio (highwater/duckdb, target <=0.33):                 %.2f\n", float64(hwRSS)/float64(dkRSS))
	return nil
}

// measure runs cmd and returns its wall time, its peak RSS and its stdout.
// Its CPU time goes to cpuTimes: on a shared machine wall time varies with
// the load, CPU time much less.
func measure(cmd *exec.Cmd) (time.Duration, int64, string, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	el := time.Since(start)
	if err != nil {
		return 0, 0, out.String(), err
	}
	lastCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return el, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10, out.String(), nil
}

// lastCPU is the user+system time of the last measured command.
var lastCPU time.Duration

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

// generate writes the base rows in a shuffled id order, then updates of
// every fifth id with later timestamps.
func generate(ctx context.Context, d *destination.Destination, rows, updates int) error {
	lake, err := synth.New(d, model)
	if err != nil {
		return fmt.Errorf("prepare lake: %w", err)
	}
	lake.TargetFileBytes = 64 << 20
	lake.RowGroupRows = 122_880
	name := make([]byte, 50)
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	text := func(seed uint64) string {
		// xorshift: text that compresses like words, not like a counter.
		x := seed*0x9E3779B97F4A7C15 | 1
		for i := range name {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			name[i] = alphabet[x%uint64(len(alphabet))]
		}
		return string(name)
	}
	// A prime stride visits every id once in an order unlike the key's.
	const stride = 1_000_003
	if _, err := lake.Export(ctx, rows, func(i int, r *synth.Row) {
		id := int64(uint64(i) * stride % uint64(rows))
		*r = synth.Row{ID: id, UpdatedAt: t0 + int64(i)*1000, Name: text(uint64(id)), Price: id % 100_000_00}
	}); err != nil {
		return fmt.Errorf("write base export: %w", err)
	}
	step := max(1, rows/max(1, updates))
	if _, err := lake.Export(ctx, updates, func(i int, r *synth.Row) {
		id := int64(i*step) % int64(rows)
		*r = synth.Row{ID: id, UpdatedAt: t0 + int64(rows)*1000 + int64(i), Name: text(uint64(id) + 1<<40), Price: -id % 100_000_00}
	}); err != nil {
		return fmt.Errorf("write update export: %w", err)
	}
	return nil
}

func quoteList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// runDuck is the DuckDB side, in its own process.
func runDuck(out string, inputs []string) error {
	if len(inputs) == 0 {
		return fmt.Errorf("duckref: no input files")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	q := fmt.Sprintf(`COPY (SELECT * FROM read_parquet(%s, filename = true, file_row_number = true)
		QUALIFY row_number() OVER (PARTITION BY id ORDER BY updated_at DESC, filename DESC, file_row_number DESC) = 1
		ORDER BY id) TO '%s' (FORMAT parquet, COMPRESSION zstd)`, quoteList(inputs), strings.ReplaceAll(out, "'", "''"))
	for _, s := range []string{"SET threads=2", "SET preserve_insertion_order=false", q} {
		if _, err := db.Exec(s); err != nil {
			return fmt.Errorf("duckdb %.40q: %w", s, err)
		}
	}
	return nil
}

// runVerify checks that DuckDB's output a and highwater's files hold the
// same rows, and prints the row count.
func runVerify(a string, files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("verify: highwater wrote no files")
	}
	sort.Strings(files)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	cols := "id, updated_at, name, price"
	q := fmt.Sprintf(`SELECT (SELECT count(*) FROM read_parquet('%s')), (SELECT count(*) FROM read_parquet(%s)),
		(SELECT count(*) FROM (SELECT %s FROM read_parquet('%s') EXCEPT ALL SELECT %s FROM read_parquet(%s)))`,
		a, quoteList(files), cols, a, cols, quoteList(files))
	var na, nb, diff int64
	if err := db.QueryRow(q).Scan(&na, &nb, &diff); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if na != nb || diff != 0 {
		return fmt.Errorf("verify: duckdb has %d rows, highwater %d, %d of duckdb's missing from highwater's", na, nb, diff)
	}
	fmt.Printf("both outputs hold the same %d rows\n", na)
	return nil
}
