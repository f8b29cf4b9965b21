package pgsource

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Tenants runs a model's tenants_query, in a read-only transaction, and
// returns its distinct values in the order returned. The query returns one
// column of a text type (cast another type: SELECT id::text); a NULL row
// names no tenant (no row can match it) and is counted in nulls.
func (s *Source) Tenants(ctx context.Context, query string) (tenants []string, nulls int, err error) {
	// The query's names are the user's: resolved as the role resolves
	// them, as a source_query's are. The session goes back to the path
	// under which type names are read.
	if err := s.setSearchPath(ctx, s.rolePath()); err != nil {
		return nil, 0, err
	}
	defer func() {
		if perr := s.setSearchPath(context.WithoutCancel(ctx), catalogPath); perr != nil && err == nil {
			tenants, nulls, err = nil, 0, perr
		}
	}()
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, s.classify("run tenants_query", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, query, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return nil, 0, fmt.Errorf("run tenants_query: %w: %w", err, ErrBadModel)
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	if len(fields) != 1 {
		// An error of the statement (a write refused) comes with no fields.
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, 0, fmt.Errorf("run tenants_query: %w: %w", err, ErrBadModel)
		}
		return nil, 0, fmt.Errorf("tenants_query returns %d columns, not one: %w", len(fields), ErrBadModel)
	}
	switch fields[0].DataTypeOID {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
	default:
		rows.Close() // the connection is busy until then
		var name string
		if err := tx.QueryRow(ctx, "SELECT format_type($1, NULL)", fields[0].DataTypeOID).Scan(&name); err != nil {
			name = fmt.Sprint("type ", fields[0].DataTypeOID)
		}
		if name != "citext" && !strings.HasSuffix(name, ".citext") {
			return nil, 0, fmt.Errorf("tenants_query returns a column of %s, not text: cast it (SELECT %s::text ...): %w", name, quoteIdent(fields[0].Name), ErrBadModel)
		}
	}
	seen := map[string]bool{}
	for rows.Next() {
		var t *string
		if err := rows.Scan(&t); err != nil {
			return nil, 0, s.classify("read tenants_query", err)
		}
		switch {
		case t == nil:
			nulls++
		case !seen[*t]:
			seen[*t] = true
			tenants = append(tenants, *t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("run tenants_query: %w", err)
	}
	return tenants, nulls, nil
}
