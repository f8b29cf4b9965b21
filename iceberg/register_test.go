package iceberg_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", for iceberg-go's SQL catalog

	"github.com/highwater-dev/highwater/iceberg"
	"github.com/highwater-dev/highwater/internal/icebergtest"
)

// TestRegisterSQL registers the view in a PostgreSQL SQL catalog and reads
// it by name through iceberg-go's own SQL catalog: in a catalog that
// highwater creates, and in one that iceberg-go created first. A later
// commit moves the entry; an older version never moves it back.
func TestRegisterSQL(t *testing.T) {
	for _, icebergFirst := range []bool{false, true} {
		name := map[bool]string{false: "highwater creates the catalog", true: "iceberg-go creates the catalog"}[icebergFirst]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			l := newLake(t, "", itemsDDL, `INSERT INTO items (id, name) VALUES (1, 'one'), (2, 'two')`)
			catURL := pg.NewDatabase(t)
			db, err := sql.Open("pgx", catURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			openCatalog := func() *sqlcat.Catalog {
				c, err := sqlcat.NewCatalog("lake", db, sqlcat.Postgres, nil)
				if err != nil {
					t.Fatalf("open iceberg-go's SQL catalog: %v", err)
				}
				return c
			}
			if icebergFirst {
				openCatalog()
			}
			conn, err := pgx.Connect(ctx, catURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			entry := iceberg.Catalog{Name: "lake", Namespace: "prod", Table: "items"}

			l.export(false)
			first := l.sync()
			if moved, err := l.view().RegisterSQL(ctx, conn, entry, first.MetadataURL); err != nil || !moved {
				t.Fatalf("register: %v, moved %v", err, moved)
			}
			tbl, err := openCatalog().LoadTable(ctx, catalog.ToIdentifier("prod", "items"))
			if err != nil {
				t.Fatalf("load the table by name: %v", err)
			}
			if tbl.MetadataLocation() != first.MetadataURL {
				t.Fatalf("the catalog names %s, want %s", tbl.MetadataLocation(), first.MetadataURL)
			}
			if n := len(icebergtest.Rows(t, tbl, 0)); n != 2 {
				t.Fatalf("read %d rows by name, want 2", n)
			}

			l.exec(`INSERT INTO items (id, name) VALUES (3, 'three')`)
			l.export(false)
			second := l.sync()
			if moved, err := l.view().RegisterSQL(ctx, conn, entry, second.MetadataURL); err != nil || !moved {
				t.Fatalf("move: %v, moved %v", err, moved)
			}
			if moved, err := l.view().RegisterSQL(ctx, conn, entry, first.MetadataURL); err != nil || moved {
				t.Fatalf("an older version moved the entry back: %v, moved %v", err, moved)
			}
			tbl, err = openCatalog().LoadTable(ctx, catalog.ToIdentifier("prod", "items"))
			if err != nil {
				t.Fatal(err)
			}
			if got := snapshotSeqs(t, tbl); !slices.Equal(got, []string{"1", "2"}) {
				t.Fatalf("the catalog's table has snapshots %v, want [1 2]", got)
			}
			var prev string
			if err := conn.QueryRow(ctx, `SELECT previous_metadata_location FROM iceberg_tables WHERE table_name = 'items'`).Scan(&prev); err != nil || prev != first.MetadataURL {
				t.Fatalf("previous_metadata_location %q (%v), want %s", prev, err, first.MetadataURL)
			}

			// Another table's entry under the name is refused.
			other := newLake(t, "", itemsDDL, `INSERT INTO items (id) VALUES (1)`)
			other.export(false)
			if _, err := other.view().RegisterSQL(ctx, conn, entry, other.sync().MetadataURL); err == nil {
				t.Fatal("another table replaced the entry")
			}
		})
	}
}
