package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
)

// deletesConfig sizes the delete-log bench (issue 11's Performance
// section).
type deletesConfig struct {
	rows int
	only bool
}

// deletesRound is one round's pair of incremental runs.
type deletesRound struct {
	updates, deletes exportRun
	changed          int64 // rows updated in the one copy, deleted in the other
	tombstones       int64 // the delete run's deletes_transferred
}

// measureDeletes times what reading the delete log adds to an incremental
// run. Each round copies one loaded table into two databases (CREATE
// DATABASE ... TEMPLATE), installs the delete log in the second and
// exports both fully, the second with --delete-log. Then it updates 1% of
// the rows of the first (stamped now()) and deletes the same 1% of the
// second, and times one incremental run of each: both read the same
// lookback and the same number of changed rows, as rows in the one and as
// log entries in the other. It prints the median of -repeat rounds, their
// ratio, the tombstones written and the peak RSS, and checks once that
// the lake holds one tombstone per deleted key.
func measureDeletes(ctx context.Context, cfg config, srv *pgtest.Server) error {
	n := cfg.deletes.rows
	if n < 100 {
		return fmt.Errorf("delete bench: -delete-rows must be at least 100")
	}
	template, err := loadTable(ctx, srv, n, cfg.reuse)
	if err != nil {
		return err
	}
	var rounds []deletesRound
	for i := 0; i < max(cfg.repeat, 1); i++ {
		r, err := deletesRoundOnce(ctx, cfg, srv, template, n, i == 0)
		if err != nil {
			return err
		}
		fmt.Printf("[deletes %d rows] round %d: %d rows updated: %.3fs (%d rows read); %d rows deleted, --delete-log: %.3fs (%d rows read, %d tombstones)\n",
			n, i+1, r.changed, r.updates.wall.Seconds(), r.updates.rows, r.changed, r.deletes.wall.Seconds(), r.deletes.rows, r.tombstones)
		rounds = append(rounds, r)
	}
	upd := median(rounds, func(r deletesRound) time.Duration { return r.updates.wall })
	del := median(rounds, func(r deletesRound) time.Duration { return r.deletes.wall })
	var rssUpd, rssDel, hwmUpd, hwmDel int64
	for _, r := range rounds {
		rssUpd, hwmUpd = max(rssUpd, r.updates.maxRSS), max(hwmUpd, r.updates.hwm)
		rssDel, hwmDel = max(rssDel, r.deletes.maxRSS), max(hwmDel, r.deletes.hwm)
	}
	fmt.Println()
	fmt.Printf("== delete log: incremental runs over %d rows, 1%% changed (median of %d; highest RSS) ==\n", n, len(rounds))
	fmt.Printf("  %d rows updated, no delete log:    %.3fs, peak RSS %.1f MiB (VmHWM %.1f MiB)\n",
		rounds[0].changed, upd.Seconds(), float64(rssUpd)/mib, float64(hwmUpd)/mib)
	fmt.Printf("  %d rows deleted, --delete-log:     %.3fs, peak RSS %.1f MiB (VmHWM %.1f MiB), %d tombstones\n",
		rounds[0].changed, del.Seconds(), float64(rssDel)/mib, float64(hwmDel)/mib, rounds[0].tombstones)
	fmt.Printf("  deletes / updates: %.2fx\n", del.Seconds()/upd.Seconds())
	return nil
}

func median(rounds []deletesRound, of func(deletesRound) time.Duration) time.Duration {
	d := make([]time.Duration, len(rounds))
	for i, r := range rounds {
		d[i] = of(r)
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func deletesRoundOnce(ctx context.Context, cfg config, srv *pgtest.Server, template string, n int, verify bool) (deletesRound, error) {
	var r deletesRound
	updURL, err := copyDatabase(ctx, srv, template, "bench_deletes_upd")
	if err != nil {
		return r, err
	}
	delURL, err := copyDatabase(ctx, srv, template, "bench_deletes_del")
	if err != nil {
		return r, err
	}
	if _, _, err := runBinary(ctx, cfg.bin, "deletes", "install", "--source", delURL, "--table", "public.t"); err != nil {
		return r, err
	}
	updDest := filepath.Join(cfg.workDir, "deletes-upd")
	delDest := filepath.Join(cfg.workDir, "deletes-del")
	defer os.RemoveAll(updDest)
	defer os.RemoveAll(delDest)
	if _, err := runExport(ctx, cfg.bin, updURL, updDest, n); err != nil {
		return r, err
	}
	if _, err := runExport(ctx, cfg.bin, delURL, delDest, n, "--delete-log"); err != nil {
		return r, err
	}

	// The same keys change in both: every hundredth id, spread over the
	// whole table and so over every page of the baseline.
	changed, err := execCount(ctx, updURL, `UPDATE t SET updated_at = now(), amount = amount + 1 WHERE id % 100 = 0`)
	if err != nil {
		return r, err
	}
	deleted, err := execCount(ctx, delURL, `DELETE FROM t WHERE id % 100 = 0`)
	if err != nil {
		return r, err
	}
	if changed != deleted {
		return r, fmt.Errorf("delete bench: %d rows updated but %d deleted", changed, deleted)
	}
	r.changed = changed

	if r.updates, err = runExport(ctx, cfg.bin, updURL, updDest, -1); err != nil {
		return r, err
	}
	if r.updates.rows < changed {
		return r, fmt.Errorf("delete bench: the incremental run read %d rows, want at least the %d updated", r.updates.rows, changed)
	}
	if r.deletes, err = runExport(ctx, cfg.bin, delURL, delDest, -1, "--delete-log"); err != nil {
		return r, err
	}
	if r.tombstones, err = lastDeletes(ctx, cfg.bin, delDest); err != nil {
		return r, err
	}
	if r.tombstones != deleted {
		return r, fmt.Errorf("delete bench: the run wrote %d tombstones, want %d", r.tombstones, deleted)
	}
	if verify {
		if err := verifyTombstones(delDest, updDest, n); err != nil {
			return r, err
		}
		fmt.Printf("[deletes %d rows] the lake holds one tombstone per deleted key (%d)\n", n, deleted)
	}
	return r, nil
}

// copyDatabase makes name a fresh copy of the database at template.
func copyDatabase(ctx context.Context, srv *pgtest.Server, template, name string) (string, error) {
	tu, err := url.Parse(template)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)",
		"CREATE DATABASE " + name + " TEMPLATE " + strings.TrimPrefix(tu.Path, "/"),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("copy database: %s: %w", q, err)
		}
	}
	tu.Path = "/" + name
	return tu.String(), nil
}

// execCount runs q and returns the rows it touched.
func execCount(ctx context.Context, dbURL, q string) (int64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", q, err)
	}
	return tag.RowsAffected(), nil
}

// lastDeletes returns deletes_transferred of the model's last commit, as
// `status --json` prints it.
func lastDeletes(ctx context.Context, bin, dest string) (int64, error) {
	_, out, err := runBinary(ctx, bin, "status", "--dest", "file://"+dest, "--model", "t", "--json")
	if err != nil {
		return 0, err
	}
	var last *struct {
		Metrics *struct {
			Deletes int64 `json:"deletes_transferred"`
		} `json:"metrics"`
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			return 0, fmt.Errorf("read status --json: %w", err)
		}
	}
	if last == nil || last.Metrics == nil {
		return 0, fmt.Errorf("status --json printed no commit with metrics:\n%s", tail(out, 2000))
	}
	return last.Metrics.Deletes, nil
}

// lakeTombstones reads every Parquet file of the lake at dest and counts
// its tombstones by id.
func lakeTombstones(dest string) (map[int64]int, error) {
	seen := map[int64]int{}
	err := filepath.WalkDir(dest, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		return readTombstones(p, seen)
	})
	if err != nil {
		return nil, fmt.Errorf("delete bench: read the lake: %w", err)
	}
	return seen, nil
}

// verifyTombstones checks that the tombstones of the lake at dest are
// exactly the deleted keys (every hundredth id up to n), each once, and
// that the lake of the updates holds none.
func verifyTombstones(delDest, updDest string, n int) error {
	seen, err := lakeTombstones(delDest)
	if err != nil {
		return err
	}
	var bad []string
	for id := int64(100); id <= int64(n); id += 100 {
		if seen[id] != 1 {
			bad = append(bad, fmt.Sprintf("id %d: %d tombstones", id, seen[id]))
		}
		delete(seen, id)
	}
	for id, c := range seen {
		bad = append(bad, fmt.Sprintf("id %d (not deleted): %d tombstones", id, c))
	}
	if len(bad) > 0 {
		return fmt.Errorf("delete bench: the lake's tombstones are not the deleted keys: %s", strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	if seen, err = lakeTombstones(updDest); err != nil {
		return err
	}
	if len(seen) > 0 {
		return fmt.Errorf("delete bench: the lake of the updates holds %d tombstones, want none", len(seen))
	}
	return nil
}

func readTombstones(path string, seen map[int64]int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, info.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	idCol, ok1 := pf.Schema().Lookup("id")
	delCol, ok2 := pf.Schema().Lookup("_hw_deleted")
	if !ok1 || !ok2 {
		return fmt.Errorf("%s has no id or _hw_deleted column", path)
	}
	buf := make([]parquet.Row, 256)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			k, err := rows.ReadRows(buf)
			for _, row := range buf[:k] {
				var id int64
				var dead bool
				for _, v := range row {
					switch v.Column() {
					case idCol.ColumnIndex:
						id = v.Int64()
					case delCol.ColumnIndex:
						dead = !v.IsNull() && v.Boolean()
					}
				}
				if dead {
					seen[id]++
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return fmt.Errorf("read %s: %w", path, err)
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}
