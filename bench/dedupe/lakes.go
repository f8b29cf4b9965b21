package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/internal/synth"
	"github.com/jackc/pgx/v5"
)

// pgLake is the lake users have: exports of a PostgreSQL table by the real
// highwater binary, with its defaults.
type pgLake struct {
	cfg config
	srv *pgtest.Server
	db  string
}

func startPG(ctx context.Context, cfg config) (*pgLake, error) {
	srv, err := pgtest.Start()
	if err != nil {
		return nil, err
	}
	l := &pgLake{cfg: cfg, srv: srv}
	if err := l.load(ctx); err != nil {
		srv.Stop()
		return nil, err
	}
	return l, nil
}

func (l *pgLake) close() { l.srv.Stop() }

// load creates a database holding items with cfg.rows rows: updated_at
// follows id, names are 50 characters of hex.
func (l *pgLake) load(ctx context.Context) error {
	t0 := time.Now()
	name := fmt.Sprintf("bench_dedupe_%d", l.cfg.rows)
	db, err := l.srv.CreateDatabase(ctx, name)
	if err != nil {
		return err
	}
	l.db = db
	if err := l.exec(ctx,
		`SET synchronous_commit = off`,
		`SET maintenance_work_mem = '512MB'`,
		`CREATE TABLE items (id bigint NOT NULL, updated_at timestamptz NOT NULL, name text NOT NULL, price numeric(12,2))`,
		fmt.Sprintf(`INSERT INTO items
SELECT g, timestamptz '2024-01-01 00:00:00+00' + g * interval '10 ms',
       md5(g::text) || left(md5((g * 7)::text), 18), round((random() * 100000000)::numeric, 2)
FROM generate_series(0, %d) AS g`, l.cfg.rows-1),
		`ALTER TABLE items ADD PRIMARY KEY (id)`,
		`CREATE INDEX items_updated_at_id ON items (updated_at, id)`,
		`VACUUM (ANALYZE) items`,
	); err != nil {
		return err
	}
	fmt.Printf("loaded %d rows in %.1fs\n", l.cfg.rows, time.Since(t0).Seconds())
	return nil
}

func (l *pgLake) exec(ctx context.Context, qs ...string) error {
	conn, err := pgx.Connect(ctx, l.db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range qs {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%.60s: %w", q, err)
		}
	}
	return nil
}

// update gives the rows that where selects a new version, newer than any
// exported one.
func (l *pgLake) update(ctx context.Context, where string) error {
	return l.exec(ctx, `UPDATE items SET updated_at = clock_timestamp(), price = price + 1,
		name = left(md5((id + 1)::text) || md5(clock_timestamp()::text), 50) WHERE `+where, `VACUUM (ANALYZE) items`)
}

func (l *pgLake) export(ctx context.Context, lake string) error {
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, l.cfg.bin, "export", "--source", l.db, "--table", "public.items", "--primary-key", "id",
		"--modified-at", "updated_at", "--dest", "file://"+lake, "--model", model)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("highwater export: %w\n%s", err, out)
	}
	fmt.Printf("export in %.1fs: %s", time.Since(t0).Seconds(), lastLine(string(out)))
	return nil
}

func (l *pgLake) first(ctx context.Context, lake string) error {
	if err := l.export(ctx, lake); err != nil {
		return err
	}
	if l.cfg.updates == 0 {
		return nil
	}
	step := max(1, l.cfg.rows/l.cfg.updates)
	if err := l.update(ctx, fmt.Sprintf("id %% %d = 0 AND id / %d < %d", step, step, l.cfg.updates)); err != nil {
		return err
	}
	return l.export(ctx, lake)
}

func (l *pgLake) incr(ctx context.Context, lake string) error {
	if err := l.update(ctx, fmt.Sprintf("id %% 1000 < %d", int(l.cfg.incr*1000))); err != nil {
		return err
	}
	return l.export(ctx, lake)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s + "\n"
}

// synthSource writes the synthetic lake in a child process, so that this
// one stays small.
type synthSource struct{ cfg config }

func (s synthSource) first(ctx context.Context, lake string) error {
	return s.child(ctx, lake, "first")
}
func (s synthSource) incr(ctx context.Context, lake string) error { return s.child(ctx, lake, "incr") }
func (s synthSource) close()                                      {}

func (s synthSource) child(ctx context.Context, lake, step string) error {
	cmd := exec.CommandContext(ctx, s.cfg.self, "-synth", step, "-keep", lake, "-rows", fmt.Sprint(s.cfg.rows),
		"-updates", fmt.Sprint(s.cfg.updates), "-incr", fmt.Sprint(s.cfg.incr))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("write the synthetic lake: %w", err)
	}
	return nil
}

const t0 = int64(1_767_225_600_000_000) // 2026-01-01 UTC in µs

// writeSynth writes the base rows in a shuffled id order and updates of
// every rows/updates-th id with later timestamps (step first), or newer
// versions of a fraction incr of the ids (step incr).
func writeSynth(ctx context.Context, cfg config, step string) error {
	d, err := destination.Open(ctx, "file://"+cfg.keep, "")
	if err != nil {
		return fmt.Errorf("open lake: %w", err)
	}
	defer d.Close()
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
	rows := cfg.rows
	if step == "incr" {
		n := int(cfg.incr * float64(rows))
		every := max(1, rows/max(1, n))
		late := t0 + int64(rows)*1000 + int64(cfg.updates) + 1_000_000_000
		_, err := lake.Export(ctx, n, func(i int, r *synth.Row) {
			id := int64(i*every+3) % int64(rows)
			*r = synth.Row{ID: id, UpdatedAt: late + int64(i), Name: text(uint64(id) + 2<<40), Price: id % 1000}
		})
		return err
	}
	// A prime stride visits every id once in an order unlike the key's.
	const stride = 1_000_003
	if _, err := lake.Export(ctx, rows, func(i int, r *synth.Row) {
		id := int64(uint64(i) * stride % uint64(rows))
		*r = synth.Row{ID: id, UpdatedAt: t0 + int64(i)*1000, Name: text(uint64(id)), Price: id % 100_000_00}
	}); err != nil {
		return fmt.Errorf("write base export: %w", err)
	}
	every := max(1, rows/max(1, cfg.updates))
	if _, err := lake.Export(ctx, cfg.updates, func(i int, r *synth.Row) {
		id := int64(i*every) % int64(rows)
		*r = synth.Row{ID: id, UpdatedAt: t0 + int64(rows)*1000 + int64(i), Name: text(uint64(id) + 1<<40), Price: -id % 100_000_00}
	}); err != nil {
		return fmt.Errorf("write update export: %w", err)
	}
	return nil
}
