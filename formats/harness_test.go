package formats

import (
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

// sessionSQL pins the settings that shape PostgreSQL's text output, which the
// tests use as the expected values.
const sessionSQL = `SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'iso_8601';
SET extra_float_digits = 3; SET bytea_output = 'hex'`

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, sessionSQL); err != nil {
		t.Fatalf("session settings: %v", err)
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
// exporter does: SelectExprs, binary results, RawValues into AppendRow.
func exportTable(t testing.TB, conn *pgx.Conn, table string, cols []Column, opts Options, wopts WriterOptions) (string, Mapping) {
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
	path := filepath.Join(t.TempDir(), "part-0.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fw, err := NewFileWriter(f, m, wopts)
	if err != nil {
		t.Fatalf("new file writer: %v", err)
	}
	var batch []parquet.Row
	version := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC).UnixMicro()
	for rows.Next() {
		row, err := m.AppendRow(nil, rows.RawValues(), version, false)
		if err != nil {
			t.Fatalf("append row: %v", err)
		}
		batch = append(batch, row)
		if len(batch) == 3 {
			if _, err := fw.WriteRows(batch); err != nil {
				t.Fatalf("write rows: %v", err)
			}
			batch = batch[:0]
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("select: %v", err)
	}
	if _, err := fw.WriteRows(batch); err != nil {
		t.Fatalf("write rows: %v", err)
	}
	fw.SetKeyValue("highwater.model", "types")
	if err := fw.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return path, m
}

// expectedCells reads PostgreSQL's own text of every value, ordered like
// exportTable: a *string per scalar, a []*string per array (nil for NULL).
func expectedCells(t testing.TB, conn *pgx.Conn, table string, cols []Column) [][]any {
	t.Helper()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		id := quoteIdent(c.Name)
		elemMoney := c.ElemOID == oidMoney
		switch {
		case c.ElemOID != 0:
			// generate_subscripts, not unnest: unnest expands composites.
			x := id + "[hw_i]"
			switch {
			case elemMoney:
				x += "::numeric::text"
			case c.ElemOID == oidBpchar:
				// ::text would strip the padding that is written
			default:
				x += "::text"
			}
			exprs[i] = fmt.Sprintf("CASE WHEN %s IS NULL THEN NULL ELSE ARRAY(SELECT %s FROM generate_subscripts(%s, 1) hw_i) END", id, x, id)
		case c.TypeOID == oidMoney:
			exprs[i] = id + "::numeric::text"
		case c.TypeOID == oidBpchar:
			exprs[i] = id
		default:
			exprs[i] = id + "::text"
		}
	}
	rows, err := conn.Query(context.Background(), "SELECT "+strings.Join(exprs, ", ")+" FROM "+table+" ORDER BY 1")
	if err != nil {
		t.Fatalf("expected values: %v", err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		dest := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i, c := range cols {
			if c.ElemOID != 0 {
				ptrs[i] = new([]*string)
			} else {
				ptrs[i] = new(*string)
			}
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("expected values: %v", err)
		}
		for i, p := range ptrs {
			switch p := p.(type) {
			case *[]*string:
				if *p != nil {
					dest[i] = *p
				}
			case **string:
				if *p != nil {
					dest[i] = *p
				}
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
