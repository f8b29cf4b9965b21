// Command reconcile-bench measures highwater reconcile against a full
// export of the same table: it loads t(id bigint primary key, updated_at
// timestamptz, payload text (50 characters), amount numeric(12,2)) into a
// throwaway cluster, runs `highwater export` (the real binary, as a
// subprocess) into a file:// destination, then `highwater reconcile` of the
// same model, and prints each one's wall time and peak RSS (VmHWM of the
// child, sampled every 20 ms). It prints figures; it asserts nothing.
//
// Usage: go run ./bench/reconcile [-bin bin/highwater] [-rows 5000000]
// [-memory-limit 128MiB]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highwater-dev/highwater/internal/memstat"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

const mib = 1 << 20

func main() {
	bin := flag.String("bin", "bin/highwater", "the highwater binary")
	rows := flag.Int("rows", 5_000_000, "rows of the table")
	limit := flag.String("memory-limit", "128MiB", "reconcile's --memory-limit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *bin, *rows, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "reconcile-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string, n int, limit string) error {
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
	t0 := time.Now()
	_, err = conn.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS t;
		CREATE TABLE t (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, payload text, amount numeric(12,2));
		INSERT INTO t SELECT g, '2026-01-01'::timestamptz + g * interval '1 ms', repeat(md5(g::text), 2)::varchar(50), g / 100.0
		FROM generate_series(1, %d) g;
		CREATE INDEX ON t (updated_at, id)`, n))
	if err == nil {
		_, err = conn.Exec(ctx, "VACUUM ANALYZE t")
	}
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("load the table: %w", err)
	}
	fmt.Printf("loaded %d rows in %.1fs\n", n, time.Since(t0).Seconds())
	model := []string{"--source", srv.URL, "--table", "public.t", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", "file://" + work, "--model", "t"}
	exp, err := measure(ctx, bin, append([]string{"export"}, model...), 0)
	if err != nil {
		return err
	}
	rec, err := measure(ctx, bin, append(append([]string{"reconcile"}, model...), "--memory-limit", limit), 0)
	if err != nil {
		return err
	}
	fmt.Printf("%d rows: export %.2fs, peak RSS %.1f MiB; reconcile %.2fs (%.2f of the export), peak RSS %.1f MiB under --memory-limit %s\n",
		n, exp.wall.Seconds(), float64(exp.hwm)/mib, rec.wall.Seconds(), rec.wall.Seconds()/exp.wall.Seconds(), float64(rec.hwm)/mib, limit)
	fmt.Println("targets: reconcile no slower than the full export; peak RSS under 150 MiB")
	return nil
}

type result struct {
	wall time.Duration
	hwm  int64
}

// measure runs the binary once; exit codes other than want fail.
func measure(ctx context.Context, bin string, args []string, want int) (result, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	stop := memstat.Sample(cmd.Process.Pid, 20*time.Millisecond)
	err := cmd.Wait()
	r := result{wall: time.Since(t0), hwm: stop()}
	if code := cmd.ProcessState.ExitCode(); code != want {
		return r, fmt.Errorf("highwater %s: exit %d (%v)\n%s%s", args[0], code, err, stdout.String(), stderr.String())
	}
	return r, nil
}
