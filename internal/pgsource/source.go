// Package pgsource reads a PostgreSQL table, or a custom query, in keyset
// pages on (modified_at, pk...). Every identifier is quoted and every value
// is a bind parameter; each page is a short statement of its own, so no
// transaction is held open across a run.
package pgsource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/redact"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// ErrUnreachable: the source server could not be reached.
var ErrUnreachable = errors.New("source unreachable")

// readBuffer is the size of the buffer the source's socket is read into.
const readBuffer = 128 << 10

// Source is one connection to the source database.
type Source struct {
	conn *pgx.Conn
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
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "highwater"
	// pgproto3 reads the socket 8 KiB at a time, a read system call for
	// each hundred rows of a page; a larger buffer under it makes one read
	// of what the server has sent so far.
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, readBuffer), w)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	s := &Source{Database: cfg.Database}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, s.classify("connect to source", err)
	}
	s.conn = conn
	if err := s.configure(ctx, cfg); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return s, nil
}

// Close ends the session.
func (s *Source) Close(ctx context.Context) error { return s.conn.Close(ctx) }

// Conn exposes the connection for tests and the bench. Its search_path
// is pinned (searchpath.go): name tables with their schema.
func (s *Source) Conn() *pgx.Conn { return s.conn }

// classify wraps err with what was being done and marks connection
// failures. pgx's messages after a successful parse name the user, database
// and host, never the password; parseConfig has refused the URLs whose
// password could have spilled into those fields.
func (s *Source) classify(what string, err error) error {
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ErrAmbiguousURL: the source URL's user info cannot be told from its host
// and path.
var ErrAmbiguousURL = errors.New("its user info is ambiguous: percent-encode '@', '/', '?' and '#' in the user name and password (%40, %2F, %3F, %23)")

// parseConfig parses the source URL or keyword/value string. Its errors
// print the string as package redact does, never pgx's own message, whose
// redaction is best effort (it quotes the string, and an unencoded '@' or
// '/' in a password moves part of it where the redaction does not look).
func parseConfig(raw string) (*pgx.ConnConfig, error) {
	if redact.Ambiguous(raw) {
		return nil, fmt.Errorf("source URL %s: %w", redact.DSN(raw), ErrAmbiguousURL)
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, &redact.Error{Msg: "parse source URL " + redact.DSN(raw) + ": " + parseReason(err), Err: err}
	}
	return cfg, nil
}

// parseReason is what pgx says is wrong with a connection string, without
// the string. pgx's ParseConfigError reads "cannot parse `STRING`: REASON"
// or "... REASON (CAUSE)"; CAUSE is kept up to what it quotes, a piece of
// the string.
func parseReason(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "not a valid connection string"
	}
	msg := pe.Error()
	cause := errors.Unwrap(pe)
	if cause != nil {
		msg = strings.TrimSuffix(msg, " ("+cause.Error()+")")
	}
	i := strings.LastIndex(msg, "`: ")
	if i < 0 {
		return "not a valid connection string"
	}
	msg = msg[i+len("`: "):]
	if cause != nil {
		if c := redact.Unquoted(cause.Error()); c != "" {
			msg += " (" + c + ")"
		}
	}
	return msg
}

// quoteIdent quotes an identifier for SQL text.
func quoteIdent(name string) string {
	return pgx.Identifier{name}.Sanitize()
}
