package formats

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
)

var srv pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &srv)) }

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	// The session the exporter runs in: the expected text forms depend on it.
	for k, v := range SessionSettings() {
		if _, err := conn.Exec(ctx, "SELECT pg_catalog.set_config($1, $2, false)", k, v); err != nil {
			t.Fatalf("session setting %s: %v", k, err)
		}
	}
	return conn
}

// discover reads the columns of a table as the source's discovery does:
// domains resolved to their base types, arrays to their element types.
func discover(t testing.TB, conn *pgx.Conn, table string) []Column {
	t.Helper()
	const q = `
WITH RECURSIVE r(attnum, oid, typmod, depth) AS (
  SELECT a.attnum, a.atttypid, a.atttypmod, 0 FROM pg_attribute a
  WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT r.attnum, t.typbasetype, CASE WHEN r.typmod >= 0 THEN r.typmod ELSE t.typtypmod END, r.depth + 1
  FROM r JOIN pg_type t ON t.oid = r.oid WHERE t.typtype = 'd'
)
SELECT a.attname, t.oid, r.typmod, format_type(a.atttypid, a.atttypmod), t.typtype::text,
  COALESCE(CASE WHEN e.typtype = 'd' THEN e.typbasetype ELSE e.oid END, 0),
  COALESCE(CASE WHEN e.typtype = 'd' THEN (SELECT typtype FROM pg_type WHERE oid = e.typbasetype) ELSE e.typtype END, ' ')::text,
  a.attnotnull
FROM pg_attribute a
JOIN r ON r.attnum = a.attnum
JOIN pg_type t ON t.oid = r.oid AND t.typtype <> 'd'
LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`
	rows, err := conn.Query(context.Background(), q, table)
	if err != nil {
		t.Fatalf("discover %s: %v", table, err)
	}
	var cols []Column
	for rows.Next() {
		var c Column
		var typtype, elemtyp string
		if err := rows.Scan(&c.Name, &c.TypeOID, &c.Typmod, &c.TypeName, &typtype, &c.ElemOID, &elemtyp, &c.NotNull); err != nil {
			t.Fatalf("discover %s: %v", table, err)
		}
		c.TypType = typtype[0]
		if c.ElemOID != 0 {
			c.ElemTypType = elemtyp[0]
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("discover %s: %v", table, err)
	}
	return cols
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// exportTable writes the table, ordered by its first column, as the
// exporter does: SelectExprs, binary results, RawValues into AppendBatch,
// batches of three rows into WriteBatch. It also writes the rows through
// AppendRow and Write, and fails unless both files are the same bytes: the
// two paths must not differ in anything a reader could see.
func exportTable(t testing.TB, conn *pgx.Conn, table string, cols []Column, opts Options, wopts WriterOptions) (string, *Mapping) {
	t.Helper()
	m, err := NewMapping(cols, opts)
	if err != nil {
		t.Fatalf("new mapping: %v", err)
	}
	idents := make([]string, len(cols))
	for i, c := range cols {
		idents[i] = quoteIdent(c.Name)
	}
	exprs := m.SelectExprs(idents)
	sql := "SELECT " + strings.Join(exprs, ", ") + " FROM " + table + " ORDER BY 1"
	formats := make(pgx.QueryResultFormats, len(cols))
	for i := range formats {
		formats[i] = pgx.BinaryFormatCode
	}
	rows, err := conn.Query(context.Background(), sql, formats)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer rows.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "part-0.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var byRow bytes.Buffer
	fw, err := NewFileWriter(f, m.Schema(), wopts)
	if err != nil {
		t.Fatalf("new file writer: %v", err)
	}
	rw, err := NewFileWriter(&byRow, m.Schema(), wopts)
	if err != nil {
		t.Fatalf("new file writer: %v", err)
	}
	b := m.NewBatch()
	var batch []parquet.Row
	var raw int64
	version := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC).UnixMicro()
	write := func() {
		if err := fw.WriteBatch(b, raw); err != nil {
			t.Fatalf("write batch: %v", err)
		}
		if err := rw.Write(batch, raw); err != nil {
			t.Fatalf("write rows: %v", err)
		}
		b.Reset()
		batch, raw = batch[:0], 0
	}
	for rows.Next() {
		values := rows.RawValues()
		if err := m.AppendBatch(b, values, version, false); err != nil {
			t.Fatalf("append batch: %v", err)
		}
		row, err := m.AppendRow(nil, values, version, false)
		if err != nil {
			t.Fatalf("append row: %v", err)
		}
		batch = append(batch, row)
		for _, v := range values {
			raw += int64(len(v)) + 4
		}
		if len(batch) == 3 {
			write()
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("select: %v", err)
	}
	write()
	for _, w := range []*FileWriter{fw, rw} {
		w.SetKeyValue("highwater.model", "types")
		if err := w.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, byRow.Bytes()) {
		t.Fatalf("the file written from batches (%d bytes) differs from the one written from rows (%d bytes)", len(got), byRow.Len())
	}
	return path, m
}

// expectedCells reads PostgreSQL's own text of every value, ordered like
// exportTable: a *string per scalar, a []*string per array (nil for NULL).
// The values are requested in text format, so each is exactly what the
// type's output function prints (what psql and COPY show), not what a cast
// to text makes of it: inet::text adds a /32 that inet's output omits, and
// xml::text keeps a declaration that xml's output drops. Array elements are
// read one row each, for the same reason. money is the documented
// exception: it is written as its numeric value.
func expectedCells(t testing.TB, conn *pgx.Conn, table string, cols []Column) [][]any {
	t.Helper()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		id := quoteIdent(c.Name)
		switch {
		case c.ElemOID != 0:
			exprs[i] = "pg_catalog.cardinality(" + id + ")"
		case c.TypeOID == oidMoney:
			exprs[i] = id + "::numeric"
		default:
			exprs[i] = id
		}
	}
	out := textRows(t, conn, "SELECT "+strings.Join(exprs, ", ")+" FROM "+table+" ORDER BY 1", len(cols))
	for i, c := range cols {
		if c.ElemOID == 0 {
			continue
		}
		id := quoteIdent(c.Name)
		elem := id + "[hw_i]"
		if c.ElemOID == oidMoney {
			elem += "::numeric"
		}
		// generate_subscripts, not unnest: unnest expands composites.
		elems := textRows(t, conn, fmt.Sprintf("SELECT %s, %s FROM %s, pg_catalog.generate_subscripts(%s, 1) hw_i ORDER BY 1, hw_i",
			quoteIdent(cols[0].Name), elem, table, id), 2)
		for r, row := range out {
			n := row[i]
			if n == nil {
				continue
			}
			count, err := strconv.Atoi(*n.(*string))
			if err != nil {
				t.Fatalf("cardinality of %s: %v", c.Name, err)
			}
			vals := make([]*string, 0, count)
			for ; count > 0; count-- {
				if len(elems) == 0 || *elems[0][0].(*string) != *out[r][0].(*string) {
					t.Fatalf("elements of %s in row %d: fewer than its cardinality", c.Name, r)
				}
				v, _ := elems[0][1].(*string)
				vals = append(vals, v)
				elems = elems[1:]
			}
			row[i] = vals
		}
	}
	return out
}

// textRows runs a query with every result in text format, a *string per
// value, nil for NULL.
func textRows(t testing.TB, conn *pgx.Conn, sql string, n int) [][]any {
	t.Helper()
	formats := make(pgx.QueryResultFormats, n)
	for i := range formats {
		formats[i] = pgx.TextFormatCode
	}
	rows, err := conn.Query(context.Background(), sql, formats)
	if err != nil {
		t.Fatalf("expected values: %v", err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		raw := rows.RawValues()
		dest := make([]any, n)
		for i, b := range raw {
			if b != nil {
				s := string(b)
				dest[i] = &s
			}
		}
		out = append(out, dest)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("expected values: %v", err)
	}
	return out
}

// canonPG turns PostgreSQL's text of one value into the canonical form the
// readers' values are also turned into.
func canonPG(t testing.TB, f Field, s string) string {
	t.Helper()
	switch {
	case f.Logical == "DATE":
		return strconv.FormatInt(int64(pgDateDays(t, s)), 10)
	case strings.HasPrefix(f.Logical, "TIMESTAMP"):
		return strconv.FormatInt(pgTimestampMicros(t, s), 10)
	case strings.HasPrefix(f.Logical, "TIME("):
		return strconv.FormatInt(pgTimeMicros(t, s, f.Logical == "TIME(MICROS,true)"), 10)
	case strings.HasPrefix(f.Logical, "DECIMAL"), f.Logical == "UUID", f.Logical == "STRING":
		return s
	case f.Physical == "BOOLEAN":
		return map[string]string{"t": "true", "f": "false", "true": "true", "false": "false"}[s]
	case f.Physical == "FLOAT":
		v, err := strconv.ParseFloat(s, 32)
		if err != nil {
			t.Fatalf("parse float4 %q: %v", s, err)
		}
		return strconv.FormatFloat(v, 'g', -1, 32)
	case f.Physical == "DOUBLE":
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("parse float8 %q: %v", s, err)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return s // integers, bytea in hex
}

// pgDateDays parses ISO dates, with " BC" and ±infinity, into days since
// 1970 under the documented clamping rule.
func pgDateDays(t testing.TB, s string) int32 {
	switch s {
	case "infinity":
		return dateMaxDays
	case "-infinity":
		return dateMinDays
	}
	tm := pgTime(t, s, "2006-01-02")
	return int32(tm.Unix() / 86400)
}

func pgTimestampMicros(t testing.TB, s string) int64 {
	switch s {
	case "infinity":
		return tsMaxMicros
	case "-infinity":
		return tsMinMicros
	}
	layout := "2006-01-02 15:04:05.999999"
	if strings.HasSuffix(strings.TrimSuffix(s, " BC"), "+00") {
		layout += "-07"
	}
	return pgTime(t, s, layout).UnixMicro()
}

func pgTime(t testing.TB, s, layout string) time.Time {
	t.Helper()
	bc := strings.HasSuffix(s, " BC")
	s = strings.TrimSuffix(s, " BC")
	// Go parses four-digit years only; years beyond 9999 are not in the fixtures.
	tm, err := time.Parse(layout, s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	if bc { // 1 BC is year 0 in the proleptic Gregorian calendar
		tm = tm.AddDate(1-2*tm.Year(), 0, 0)
	}
	return tm
}

func pgTimeMicros(t testing.TB, s string, tz bool) int64 {
	t.Helper()
	var off int64
	if tz {
		i := strings.LastIndexAny(s, "+-")
		z := s[i:]
		s = s[:i]
		parts := strings.Split(z[1:], ":")
		mult := []int64{3600, 60, 1}
		for j, p := range parts {
			n, _ := strconv.ParseInt(p, 10, 64)
			off += n * mult[j]
		}
		if z[0] == '-' {
			off = -off
		}
	}
	h, _ := strconv.ParseInt(s[0:2], 10, 64)
	m, _ := strconv.ParseInt(s[3:5], 10, 64)
	sec, err := strconv.ParseFloat(s[6:], 64)
	if err != nil {
		t.Fatalf("parse time %q: %v", s, err)
	}
	us := h*3600e6 + m*60e6 + int64(sec*1e6+0.5)
	if tz {
		us = ((us-off*1e6)%microsPerDay + microsPerDay) % microsPerDay
	}
	return us
}
