package formats

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/duckdb/duckdb-go/v2"
)

// decimalValue is a reader's DECIMAL, kept exact.
type decimalValue struct {
	unscaled *big.Int
	scale    int
}

// readDuck reads every column of a file with DuckDB, ordered by the first.
func readDuck(t testing.TB, path string, fields []Field) [][]any {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("open duckdb: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec("SET TimeZone = 'UTC'"); err != nil {
		t.Fatalf("duckdb time zone: %v", err)
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = quoteIdent(f.Name)
	}
	q := fmt.Sprintf("SELECT %s FROM read_parquet('%s') ORDER BY 1", strings.Join(names, ", "), path)
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("duckdb read_parquet: %v", err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(fields))
		ptrs := make([]any, len(fields))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("duckdb scan: %v", err)
		}
		for i := range vals {
			vals[i] = duckValue(vals[i])
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("duckdb rows: %v", err)
	}
	return out
}

func duckValue(v any) any {
	switch v := v.(type) {
	case duckdb.Decimal:
		return decimalValue{v.Value, int(v.Scale)}
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = duckValue(e)
		}
		return out
	}
	return v
}

// readArrow reads every column of a file with arrow-go's Parquet reader.
func readArrow(t testing.TB, path string) [][]any {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("arrow open: %v", err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("arrow reader: %v", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("arrow read table: %v", err)
	}
	defer tbl.Release()
	n := int(tbl.NumRows())
	out := make([][]any, n)
	for i := range out {
		out[i] = make([]any, tbl.NumCols())
	}
	for c := 0; c < int(tbl.NumCols()); c++ {
		r := 0
		for _, chunk := range tbl.Column(c).Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				out[r][c] = arrowValue(t, chunk, i)
				r++
			}
		}
	}
	return out
}

func arrowValue(t testing.TB, a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return append([]byte(nil), a.Value(i)...)
	case *array.FixedSizeBinary:
		return append([]byte(nil), a.Value(i)...)
	case *array.Date32:
		return int32(a.Value(i))
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.Time64:
		return int64(a.Value(i))
	case *array.Decimal32:
		return decimalValue{big.NewInt(int64(a.Value(i))), int(a.DataType().(*arrow.Decimal32Type).Scale)}
	case *array.Decimal64:
		return decimalValue{big.NewInt(int64(a.Value(i))), int(a.DataType().(*arrow.Decimal64Type).Scale)}
	case *array.Decimal128:
		return decimalValue{a.Value(i).BigInt(), int(a.DataType().(*arrow.Decimal128Type).Scale)}
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, arrowValue(t, a.ListValues(), int(j)))
		}
		return out
	case array.ExtensionArray:
		return arrowValue(t, a.Storage(), i)
	}
	t.Fatalf("arrow: no test conversion for %T", a)
	return nil
}

// canonReader turns a reader's value into the canonical form of canonPG.
func canonReader(t testing.TB, f Field, v any) string {
	t.Helper()
	switch v := v.(type) {
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	case []byte:
		if f.Logical == "UUID" {
			d := make([]byte, 36)
			formatUUID(d, v)
			return string(d)
		}
		return `\x` + hex.EncodeToString(v)
	case duckdb.UUID:
		d := make([]byte, 36)
		formatUUID(d, v[:])
		return string(d)
	case decimalValue:
		return formatDecimal(v)
	case time.Time:
		switch {
		case f.Logical == "DATE":
			return strconv.FormatInt(v.Unix()/86400-boolInt(v.Unix()%86400 < 0), 10)
		case strings.HasPrefix(f.Logical, "TIME("):
			return strconv.FormatInt(int64(v.Hour())*3600e6+int64(v.Minute())*60e6+int64(v.Second())*1e6+int64(v.Nanosecond()/1000), 10)
		}
		return strconv.FormatInt(v.UnixMicro(), 10)
	}
	t.Fatalf("column %s: no canonical form for %T", f.Name, v)
	return ""
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func formatDecimal(d decimalValue) string {
	s := new(big.Int).Abs(d.unscaled).String()
	neg := d.unscaled.Sign() < 0
	if d.scale > 0 {
		if len(s) <= d.scale {
			s = strings.Repeat("0", d.scale-len(s)+1) + s
		}
		s = s[:len(s)-d.scale] + "." + s[len(s)-d.scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// compareCells checks one reader's rows against PostgreSQL's, cell by cell.
func compareCells(t *testing.T, reader string, fields []Field, want [][]any, got [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", reader, len(got), len(want))
	}
	bad := 0
	for r := range want {
		for c, f := range fields[:len(want[r])] {
			w := canonWant(t, f, want[r][c])
			g := canonGot(t, f, got[r][c])
			if w != g {
				bad++
				if bad <= 40 {
					t.Errorf("%s: row %d column %s (%s): got %s, want %s", reader, r, f.Name, f.SourceType, g, w)
				}
			}
		}
	}
}

func canonWant(t testing.TB, f Field, v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case *string:
		return canonPG(t, f, *v)
	case []*string:
		parts := make([]string, len(v))
		for i, e := range v {
			if e == nil {
				parts[i] = "NULL"
			} else {
				parts[i] = canonPG(t, f, *e)
			}
		}
		return "[" + strings.Join(parts, "|") + "]"
	}
	t.Fatalf("expected value of %T", v)
	return ""
}

func canonGot(t testing.TB, f Field, v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			if e == nil {
				parts[i] = "NULL"
			} else {
				parts[i] = canonReader(t, f, e)
			}
		}
		return "[" + strings.Join(parts, "|") + "]"
	}
	return canonReader(t, f, v)
}
