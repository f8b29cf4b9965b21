package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// wideSizesMiB are the value sizes of the wide-row table, repeated: 20
// rows of 1 to 50 MiB are about 300 MiB.
var wideSizesMiB = []int{1, 5, 10, 20, 40, 50}

// measureWide exports a table of wide rows and prints the peak RSS and the
// files' size against the raw bytes: Parquet statistics once copied each
// large value into page headers and the footer, and the memory grew with
// them (issue 9, item 13).
func measureWide(ctx context.Context, cfg config, srv *pgtest.Server, rows int) error {
	t0 := time.Now()
	u, err := srv.CreateDatabase(ctx, "bench_wide")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, payload text NOT NULL)`); err != nil {
		return err
	}
	for i := 0; i < rows; i++ {
		mib := wideSizesMiB[i%len(wideSizesMiB)]
		// md5s of random numbers: text that compresses about 2:1, as
		// documents and logs do, not a run that compresses to nothing.
		// $1 is typed once: used bare and in interval arithmetic, the
		// server deduces two types for it and refuses the statement.
		q := `INSERT INTO t SELECT $1::bigint, timestamptz '2024-01-01 00:00:00+00' + $1::bigint * interval '1 s',
  (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, $2::int))`
		if _, err := conn.Exec(ctx, q, i+1, mib<<20/32); err != nil {
			return fmt.Errorf("load wide row %d: %w", i+1, err)
		}
	}
	var raw int64
	if err := conn.QueryRow(ctx, `SELECT sum(octet_length(payload)) FROM t`).Scan(&raw); err != nil {
		return err
	}
	fmt.Printf("[wide] loaded %d rows of %d-%d MiB (%.0f MiB) in %.1fs\n", rows, wideSizesMiB[0], wideSizesMiB[len(wideSizesMiB)-1],
		float64(raw)/mib, time.Since(t0).Seconds())
	dest := filepath.Join(cfg.workDir, "wide")
	r, err := runExport(ctx, cfg.bin, u, dest, rows)
	if err != nil {
		return err
	}
	out, files := dirSize(dest)
	fmt.Printf("[wide] export: %.2fs, peak RSS %.1f MiB (VmHWM %.1f MiB), %d files, %.1f MiB written for %.1f MiB raw (%.2fx)\n",
		r.wall.Seconds(), float64(r.maxRSS)/mib, float64(r.hwm)/mib, files, float64(out)/mib, float64(raw)/mib, float64(out)/float64(raw))
	return nil
}
