package formats

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestWideValueStatistics writes values of megabytes, and values just past
// the statistics' prefix whose max cannot be cut naively: a plain prefix of
// a max sorts before the value, and a reader pruning on it loses the row.
// The footer must stay small, both readers must read every value, and every
// min and max present must bound every value of its row group.
func TestWideValueStatistics(t *testing.T) {
	url := srv.NewDatabase(t)
	pgtest.Exec(t, url, `CREATE TABLE wide (id int, t text, b bytea, s text)`,
		`INSERT INTO wide VALUES
		 (1, repeat('a', 6000000) || 'z', decode(repeat('ff', 6000000), 'hex'), 'small'),
		 (2, repeat('é', 3000000), decode(repeat('00ff', 2500000), 'hex'), 'x'),
		 (3, repeat('z', 64) || 'more', decode(repeat('ff', 64) || '00', 'hex'), NULL),
		 (4, repeat(chr(1114111), 20), decode(repeat('fe', 70), 'hex'), 'small2'),
		 (5, repeat('y', 63) || repeat(chr(55295), 3), NULL, ''),
		 (6, 'short', '\x00', 'zz')`)
	conn := connect(t, url)
	cols := discover(t, conn, "wide")
	path, m := exportTable(t, conn, "wide", cols, Options{}, WriterOptions{RowGroupRows: 2})

	lintPageIndex(t, path, 6)
	if n := footerSize(t, path); n > 1<<20 {
		t.Errorf("footer is %d bytes, want under 1 MiB", n)
	}
	fields := m.Fields()
	want := expectedCells(t, conn, "wide", cols)
	arrowRows := readArrow(t, path)
	compareCells(t, "arrow", fields, want, arrowRows)
	compareCells(t, "duckdb", fields, want, readDuck(t, path, fields))

	// DuckDB prunes row groups on their statistics: each value must still
	// be found by equality.
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, r := range arrowRows {
		for c, name := range []string{"t", "b"} {
			v := r[c+1]
			if v == nil {
				continue
			}
			var n int
			q := fmt.Sprintf("SELECT count(*) FROM read_parquet('%s') WHERE %s = ?", path, name)
			if err := db.QueryRow(q, v).Scan(&n); err != nil {
				t.Fatalf("duckdb filter on %s: %v", name, err)
			}
			if n != 1 {
				t.Errorf("duckdb finds %d rows with %s of row %v, want 1", n, name, r[0])
			}
		}
	}

	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	row := 0
	exact := 0
	for g := 0; g < rdr.NumRowGroups(); g++ {
		rg := rdr.MetaData().RowGroup(g)
		n := int(rg.NumRows())
		for c := 1; c <= 3; c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			st, err := cc.Statistics()
			if err != nil || st == nil || !st.HasMinMax() {
				continue
			}
			bs := st.(*metadata.ByteArrayStatistics)
			lo, hi := []byte(bs.Min()), []byte(bs.Max())
			if len(lo) > statsPrefix+4 || len(hi) > statsPrefix+4 {
				t.Errorf("row group %d column %d: statistics of %d and %d bytes", g, c, len(lo), len(hi))
			}
			for _, r := range arrowRows[row : row+n] {
				v := valueBytes(r[c])
				if v == nil {
					continue
				}
				if bytes.Compare(lo, v) > 0 || bytes.Compare(v, hi) > 0 {
					t.Errorf("row group %d column %d: value of row %v (%d bytes) outside [%q, %q]", g, c, r[0], len(v), lo, hi)
				}
				if c == 3 && (bytes.Equal(v, lo) || bytes.Equal(v, hi)) {
					exact++
				}
			}
		}
		row += n
	}
	if exact == 0 {
		t.Error("short values have no exact statistics")
	}
}

func valueBytes(v any) []byte {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case []byte:
		return v
	}
	return nil
}

func footerSize(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(binary.LittleEndian.Uint32(b[len(b)-8:]))
}
