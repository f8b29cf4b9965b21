// Package pgsource reads a PostgreSQL table, or a custom query, in keyset
// pages on (modified_at, pk...). Every identifier is quoted and every value
// is a bind parameter; each page is a short statement of its own, so no
// transaction is held open across a run.
package pgsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/formats"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnreachable: the source server could not be reached.
var ErrUnreachable = errors.New("source unreachable")

// Source is one connection to the source database.
type Source struct {
	conn     *pgx.Conn
	password string
	// TimeZone is the database's default TimeZone, read before the session
	// is switched to UTC; naive timestamps are interpreted in it.
	TimeZone string
	// SystemID identifies the cluster; Database names the database.
	SystemID string
	Database string
	// roleSchemas is the role's own search_path, as current_schemas(false)
	// resolved it; the session itself never runs under it (searchpath.go).
	roleSchemas []string
}

// Connect opens a connection. The URL's password never appears in an
// error.
func Connect(ctx context.Context, url string) (*Source, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse source URL: %w", scrubErr(err, ""))
	}
	cfg.RuntimeParams["application_name"] = "highwater"
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	s := &Source{password: cfg.Password, Database: cfg.Database}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, s.classify("connect to source", err)
	}
	s.conn = conn
	// Every later statement of the session is read-only: a source_query
	// that calls a function with side effects (or nextval) fails instead of
	// changing the source. Nothing highwater itself runs on this session
	// writes. Set here rather than in the startup packet, which poolers
	// such as PgBouncer refuse.
	if _, err := conn.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
		conn.Close(ctx)
		return nil, s.classify("configure source session", err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('TimeZone'), pg_catalog.current_database(), pg_catalog.current_schemas(false)::text[]").Scan(&s.TimeZone, &s.Database, &s.roleSchemas); err != nil {
		conn.Close(ctx)
		return nil, s.classify("read source settings", err)
	}
	if err := s.setSearchPath(ctx, catalogPath); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	// Text forms (of keys, ranges, arrays) must not depend on the role's
	// settings, so the session is pinned.
	for name, value := range formats.SessionSettings() {
		if _, err := conn.Exec(ctx, "SELECT set_config($1, $2, false)", name, value); err != nil {
			conn.Close(ctx)
			return nil, s.classify("configure source session", err)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&s.SystemID); err != nil {
		// pg_control_system() may be revoked; the server's address then
		// stands in for it.
		s.SystemID = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	return s, nil
}

// Close ends the session.
func (s *Source) Close(ctx context.Context) error { return s.conn.Close(ctx) }

// Conn exposes the connection for tests and the bench. Its search_path
// is pinned (searchpath.go): name tables with their schema.
func (s *Source) Conn() *pgx.Conn { return s.conn }

// classify wraps err with what was being done, marks connection failures,
// and removes the password from the message.
func (s *Source) classify(what string, err error) error {
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, scrubErr(err, s.password))
	}
	return fmt.Errorf("%s: %w", what, scrubErr(err, s.password))
}

// scrubbed keeps the error chain but replaces the message.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

func scrubErr(err error, password string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if password != "" && strings.Contains(msg, password) {
		msg = strings.ReplaceAll(msg, password, "REDACTED")
	}
	return &scrubbed{msg: msg, err: err}
}

// quoteIdent quotes an identifier for SQL text.
func quoteIdent(name string) string {
	return pgx.Identifier{name}.Sanitize()
}
