package formats

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func loadFixture(t *testing.T, name string) (string, *pgx.Conn) {
	t.Helper()
	sql, err := os.ReadFile(filepath.Join("..", "testdata", "types", name))
	if err != nil {
		t.Fatal(err)
	}
	url := srv.NewDatabase(t)
	pgtest.Exec(t, url, string(sql))
	return url, connect(t, url)
}

// roundTrip exports a table and checks every value as DuckDB and arrow-go
// read it against PostgreSQL's own text of it.
func roundTrip(t *testing.T, conn *pgx.Conn, table string, opts Options) (string, *Mapping) {
	t.Helper()
	cols := discover(t, conn, table)
	path, m := exportTable(t, conn, table, cols, opts, WriterOptions{RowGroupRows: 4})
	fields := m.Fields()
	want := expectedCells(t, conn, table, cols)
	if len(want) == 0 {
		t.Fatal("fixture has no rows")
	}
	compareCells(t, "duckdb", fields, want, readDuck(t, path, fields))
	compareCells(t, "arrow", fields, want, readArrow(t, path))
	lintFile(t, path, opts != Options{})
	return path, m
}

func TestRoundTripCore(t *testing.T) {
	_, conn := loadFixture(t, "core.sql")
	roundTrip(t, conn, "core", Options{})
}

func TestRoundTripAll(t *testing.T) {
	_, conn := loadFixture(t, "all.sql")
	roundTrip(t, conn, "alltypes", Options{})
}

// TestRoundTripText checks the types written in their text form against
// the output function of each, value for value (see expectedCells).
func TestRoundTripText(t *testing.T) {
	_, conn := loadFixture(t, "text.sql")
	roundTrip(t, conn, "texttypes", Options{})
}
