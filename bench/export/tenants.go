package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// tenantsConfig sizes the tenant fan-out bench (issue 15's Performance
// section): rows over tenants, exported with --parallel.
type tenantsConfig struct {
	rows, tenants, parallel int
	only                    bool
}

// Goals of the tenant fan-out bench.
const (
	tenantsGoalRatio    = 3 // total time against one export of the whole table
	tenantsGoalRSS      = 300 * mib
	tenantsGoalNoChange = 60 * time.Second
)

var summaryRE = regexp.MustCompile(`summary: (\d+) done, (\d+) failed, (\d+) skipped`)

// measureTenants loads a table of rows spread evenly over tenants and
// exports it twice: once whole, as a plain model, and once as a config
// model whose tenants_query names every tenant, with --parallel in one
// process, followed by a no-change round over all tenants. It prints the
// fan-out's time against the plain export's, the most source connections
// seen (pg_stat_activity, sampled every 5 ms), the peak RSS and the
// no-change round's time, each against its goal.
func measureTenants(ctx context.Context, cfg config, srv *pgtest.Server) error {
	tc := cfg.tenants
	if tc.rows < 1 || tc.tenants < 1 || tc.parallel < 1 {
		return fmt.Errorf("tenant bench: -tenant-rows, -tenants and -tenant-parallel must be positive")
	}
	u, err := loadTenantTable(ctx, srv, tc.rows, tc.tenants)
	if err != nil {
		return err
	}

	plainDest := filepath.Join(cfg.workDir, "tenants-plain")
	plain, err := runExport(ctx, cfg.bin, u, plainDest, tc.rows)
	if err != nil {
		return err
	}
	os.RemoveAll(plainDest)
	fmt.Printf("[tenants] one export of the whole table, no tenants: %.2fs, peak RSS %.1f MiB\n", plain.wall.Seconds(), float64(plain.maxRSS)/mib)

	cfgFile := filepath.Join(cfg.workDir, "tenants.yaml")
	doc := fmt.Sprintf(`source: %q
dest: %q
models:
  - name: t
    table: public.t
    primary_key: id
    modified_at: updated_at
    tenant_column: org
    tenants_query: SELECT name FROM orgs
`, u, "file://"+filepath.Join(cfg.workDir, "tenants", "{tenant}"))
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		return err
	}
	round := func(what string, wantRows int) (exportRun, int, error) {
		var r exportRun
		var out string
		conns, err := peakConnections(ctx, u, func() error {
			var err error
			r, out, err = runBinary(ctx, cfg.bin, "export", "--config", cfgFile, "--parallel", strconv.Itoa(tc.parallel))
			return err
		})
		if err != nil {
			return r, 0, err
		}
		m := summaryRE.FindStringSubmatch(out)
		if m == nil || m[1] != strconv.Itoa(tc.tenants) || m[2] != "0" {
			return r, 0, fmt.Errorf("%s: want %d tenants done and none failed:\n%s", what, tc.tenants, tail(out, 2000))
		}
		var rows int64
		for _, c := range committedRE.FindAllStringSubmatch(out, -1) {
			n, _ := strconv.ParseInt(c[1], 10, 64)
			rows += n
		}
		if rows != int64(wantRows) {
			return r, 0, fmt.Errorf("%s: the tenants' commits hold %d rows, want %d", what, rows, wantRows)
		}
		fmt.Printf("[tenants] %s: %.2fs, %d source connections at most, peak RSS %.1f MiB (VmHWM %.1f MiB)\n",
			what, r.wall.Seconds(), conns, float64(r.maxRSS)/mib, float64(r.hwm)/mib)
		return r, conns, nil
	}
	full, fullConns, err := round(fmt.Sprintf("export of %d tenants, --parallel %d", tc.tenants, tc.parallel), tc.rows)
	if err != nil {
		return err
	}
	again, againConns, err := round("no-change round", 0)
	if err != nil {
		return err
	}
	os.RemoveAll(filepath.Join(cfg.workDir, "tenants"))

	ratio := full.wall.Seconds() / plain.wall.Seconds()
	conns := max(fullConns, againConns)
	rss := max(full.maxRSS, again.maxRSS)
	fmt.Println()
	fmt.Printf("== %d rows over %d tenants, --parallel %d, one process ==\n", tc.rows, tc.tenants, tc.parallel)
	fmt.Printf("  all tenants: %.2fs against %.2fs for the whole table without tenants: %.2fx %s (goal <= %dx)\n",
		full.wall.Seconds(), plain.wall.Seconds(), ratio, verdict(ratio <= tenantsGoalRatio), tenantsGoalRatio)
	fmt.Printf("  source connections at most: %d %s (goal <= %d)\n", conns, verdict(conns <= tc.parallel+1), tc.parallel+1)
	fmt.Printf("  peak RSS: %.1f MiB (VmHWM %.1f MiB) %s (goal <= %d MiB)\n",
		float64(rss)/mib, float64(max(full.hwm, again.hwm))/mib, verdict(rss <= tenantsGoalRSS), tenantsGoalRSS/mib)
	fmt.Printf("  no-change round over all tenants: %.2fs %s (goal < %s)\n",
		again.wall.Seconds(), verdict(again.wall < tenantsGoalNoChange), tenantsGoalNoChange)
	return nil
}

// loadTenantTable creates a database holding t(id, org, updated_at,
// payload, amount) with rows spread round-robin over tenants, the indexes
// both exports need ((updated_at, id) for the plain one, (org,
// updated_at, id) for the tenants), and orgs(name) listing the tenants.
func loadTenantTable(ctx context.Context, srv *pgtest.Server, rows, tenants int) (string, error) {
	t0 := time.Now()
	name := fmt.Sprintf("bench_tenants_%d_%d", rows, tenants)
	u, err := srv.CreateDatabase(ctx, name)
	if err != nil {
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
		`CREATE TABLE t (id bigint NOT NULL, org text NOT NULL, updated_at timestamptz NOT NULL, payload text NOT NULL, amount numeric(12,2))`,
		fmt.Sprintf(`INSERT INTO t
SELECT g,
       'org-' || lpad((g %% %d)::text, 6, '0'),
       timestamptz '2024-01-01 00:00:00+00' + g * interval '10 ms' + (random() * 60000)::int * interval '1 ms',
       md5(g::text) || left(md5((g * 7)::text), 18),
       round((random() * 100000000)::numeric, 2)
FROM generate_series(1, %d) AS g`, tenants, rows),
		`ALTER TABLE t ADD PRIMARY KEY (id)`,
		`CREATE INDEX t_updated_at_id ON t (updated_at, id)`,
		`CREATE INDEX t_org_updated_at_id ON t (org, updated_at, id)`,
		`CREATE TABLE orgs AS SELECT DISTINCT org AS name FROM t`,
		`VACUUM (ANALYZE) t`,
		`CHECKPOINT`,
	); err != nil {
		return "", fmt.Errorf("load %d rows over %d tenants: %w", rows, tenants, err)
	}
	fmt.Printf("loaded %d rows over %d tenants in %.1fs\n", rows, tenants, time.Since(t0).Seconds())
	return u, nil
}

// peakConnections runs run and returns the most highwater sessions seen
// on the source meanwhile.
func peakConnections(ctx context.Context, dbURL string, run func() error) (int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var peak int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'highwater'`).Scan(&n); err == nil {
				peak = max(peak, n)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	err = run()
	close(stop)
	wg.Wait()
	return peak, err
}
