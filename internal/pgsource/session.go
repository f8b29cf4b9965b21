package pgsource

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/highwater-dev/highwater/formats"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Every run, even one that finds nothing new, sets up its session and
// discovers its table, and to a source across a network each statement
// costs a round trip, which the server's work on a catalog query is far
// below. So those statements are few, whatever the table's width, and
// each takes one round trip: pgx's default mode spends two on a statement
// it has not cached yet (Parse and Describe, then Bind and Execute), and
// a new process has cached none. The keyset pages, which repeat, keep the
// default mode.

// oneShot is the mode of a statement that runs once per session: one
// round trip, with text parameters and results, and nothing left cached
// on the server. A connection string that asks for the simple protocol
// (default_query_exec_mode, for poolers that refuse the extended one)
// keeps it, which is one round trip too.
func (s *Source) oneShot() pgx.QueryExecMode {
	if m := s.conn.Config().DefaultQueryExecMode; m == pgx.QueryExecModeSimpleProtocol {
		return m
	}
	return pgx.QueryExecModeExec
}

// sessionSQL reads what a source is, under the role's own settings, before
// the session is pinned. Every name is qualified, since the role's
// search_path may put another schema before pg_catalog. The system
// identifier is asked for only where the role may call
// pg_control_system(), which may be revoked; the caller then falls back
// to the server's address.
const sessionSQL = `SELECT pg_catalog.current_setting('TimeZone'), pg_catalog.current_database(),
	pg_catalog.current_schemas(false)::pg_catalog.text[],
	CASE WHEN pg_catalog.has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')
		THEN (SELECT system_identifier::pg_catalog.text FROM pg_catalog.pg_control_system()) END`

// sessionNoIDSQL is sessionSQL for a server where asking for the system
// identifier fails even so.
const sessionNoIDSQL = `SELECT pg_catalog.current_setting('TimeZone'), pg_catalog.current_database(),
	pg_catalog.current_schemas(false)::pg_catalog.text[], NULL::pg_catalog.text`

// pinSQL sets each named setting for the rest of the session, in one
// statement.
const pinSQL = `SELECT pg_catalog.set_config(s.name, s.value, false)
	FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) AS s(name, value)`

// configure reads the source's settings and identity, then pins the
// session: read-only, search_path pg_catalog (searchpath.go), and the
// settings that fix the text forms of keys, ranges and arrays. It takes
// two round trips.
func (s *Source) configure(ctx context.Context, cfg *pgx.ConnConfig) error {
	var systemID *string
	err := s.conn.QueryRow(ctx, sessionSQL, s.oneShot()).Scan(&s.TimeZone, &s.Database, &s.roleSchemas, &systemID)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
		err = s.conn.QueryRow(ctx, sessionNoIDSQL, s.oneShot()).Scan(&s.TimeZone, &s.Database, &s.roleSchemas, &systemID)
	}
	if err != nil {
		return s.classify("read source settings", err)
	}
	if systemID != nil {
		s.SystemID = *systemID
	} else {
		s.SystemID = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	// Every later statement of the session is read-only: a source_query
	// that calls a function with side effects (or nextval) fails instead of
	// changing the source. Nothing highwater itself runs on this session
	// writes. Set here rather than in the startup packet, which poolers
	// such as PgBouncer refuse.
	names := []string{"default_transaction_read_only", "search_path"}
	values := []string{"on", quotePath(catalogPath)}
	// Text forms (of keys, ranges, arrays) must not depend on the role's
	// settings, so the session is pinned.
	settings := formats.SessionSettings()
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		names, values = append(names, name), append(values, settings[name])
	}
	if _, err := s.conn.Exec(ctx, pinSQL, s.oneShot(), names, values); err != nil {
		return s.classify("configure source session", err)
	}
	return nil
}

// quotePath is schemas as a search_path value.
func quotePath(schemas []string) string {
	quoted := make([]string, len(schemas))
	for i, n := range schemas {
		quoted[i] = quoteIdent(n)
	}
	return strings.Join(quoted, ", ")
}
