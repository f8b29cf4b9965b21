package pgtest

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// DatabaseURL returns the URL of database name on s.
func (s *Server) DatabaseURL(name string) (string, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return "", fmt.Errorf("parse server URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// CreateDatabase makes name a new empty database on s, dropping any of
// that name first (WITH (FORCE): sessions an earlier run left are ended),
// and returns its URL. Unlike NewDatabase it outlives the test: it is for
// programs such as the benchmarks, which load a database once and keep it.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	u, err := s.DatabaseURL(name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return u, nil
}
