package iceberg

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Catalog names a table in an Iceberg SQL catalog: the tables of Iceberg's
// JDBC catalog (iceberg_tables, iceberg_namespace_properties), which Spark,
// Trino, Flink, PyIceberg and iceberg-go read from PostgreSQL.
type Catalog struct {
	// Name is the catalog's name, as engines configure it (e.g. the <name>
	// of spark.sql.catalog.<name>).
	Name      string
	Namespace string
	Table     string
}

// RegisterSQL points the catalog's entry for c at the view's newest
// metadata version, metadataURL: it creates the catalog's tables and the
// entry when they are missing, and otherwise moves the entry with the
// catalog's own conditional update (metadata_location = the old one, as
// the JDBC catalog commits). It never moves an entry backwards, and refuses
// one that names another table. It reports whether it changed the entry.
func (v *View) RegisterSQL(ctx context.Context, conn *pgx.Conn, c Catalog, metadataURL string) (bool, error) {
	for _, ddl := range []string{
		`CREATE TABLE IF NOT EXISTS iceberg_tables (
			catalog_name VARCHAR(255) NOT NULL,
			table_namespace VARCHAR(255) NOT NULL,
			table_name VARCHAR(255) NOT NULL,
			metadata_location VARCHAR(1000),
			previous_metadata_location VARCHAR(1000),
			iceberg_type VARCHAR(5),
			PRIMARY KEY (catalog_name, table_namespace, table_name))`,
		`CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
			catalog_name VARCHAR(255) NOT NULL,
			namespace VARCHAR(255) NOT NULL,
			property_key VARCHAR(255) NOT NULL,
			property_value VARCHAR(1000),
			PRIMARY KEY (catalog_name, namespace, property_key))`,
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			return false, fmt.Errorf("create the catalog's tables: %w", err)
		}
	}
	// A catalog created by an older JDBC catalog has no iceberg_type.
	var typed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'iceberg_tables' AND column_name = 'iceberg_type')`).Scan(&typed); err != nil {
		return false, fmt.Errorf("read the catalog's schema: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO iceberg_namespace_properties VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING`,
		c.Name, c.Namespace); err != nil {
		return false, fmt.Errorf("create namespace %s: %w", c.Namespace, err)
	}
	for range 20 {
		var old *string
		err := conn.QueryRow(ctx, `SELECT metadata_location FROM iceberg_tables
			WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3`, c.Name, c.Namespace, c.Table).Scan(&old)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			q := `INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) VALUES ($1, $2, $3, $4)`
			if typed {
				q = `INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) VALUES ($1, $2, $3, $4, 'TABLE')`
			}
			_, err := conn.Exec(ctx, q, c.Name, c.Namespace, c.Table, metadataURL)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" {
				continue // registered meanwhile: look again
			}
			if err != nil {
				return false, fmt.Errorf("register %s.%s: %w", c.Namespace, c.Table, err)
			}
			return true, nil
		case err != nil:
			return false, fmt.Errorf("read the catalog entry of %s.%s: %w", c.Namespace, c.Table, err)
		}
		if old != nil && *old == metadataURL {
			return false, nil
		}
		if old != nil {
			oldDir, oldName := path.Split(*old)
			oldN, ok := parseMetadataName(oldName)
			if !ok || strings.TrimSuffix(oldDir, "/") != v.root+"/"+metadataDir {
				return false, fmt.Errorf("catalog entry %s.%s names another table (%s): drop it first, or register under another name", c.Namespace, c.Table, *old)
			}
			_, newName := path.Split(metadataURL)
			if newN, _ := parseMetadataName(newName); newN < oldN {
				return false, nil // a newer version is registered already
			}
		}
		tag, err := conn.Exec(ctx, `UPDATE iceberg_tables SET metadata_location = $4, previous_metadata_location = metadata_location
			WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 AND metadata_location IS NOT DISTINCT FROM $5`,
			c.Name, c.Namespace, c.Table, metadataURL, old)
		if err != nil {
			return false, fmt.Errorf("move the catalog entry of %s.%s: %w", c.Namespace, c.Table, err)
		}
		if tag.RowsAffected() == 1 {
			return true, nil
		}
	}
	return false, fmt.Errorf("move the catalog entry of %s.%s: it kept changing", c.Namespace, c.Table)
}
