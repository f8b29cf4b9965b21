// Package icebergtest reads an Iceberg table the way an engine would, for
// tests: given only its location, with iceberg-go's own reader (its own file
// systems, its own Parquet reader), never through highwater's code.
package icebergtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud" // s3:// for the reader
	"github.com/apache/iceberg-go/table"
)

// Open loads the table at location (e.g. file:///tmp/lake/items) from its
// version-hint.text, as DuckDB and Spark's path tables find it. props
// configure iceberg-go's file system (s3.endpoint and so on).
func Open(t testing.TB, location string, props map[string]string) *table.Table {
	t.Helper()
	ctx := context.Background()
	fs, err := iceio.LoadFS(ctx, props, location)
	if err != nil {
		t.Fatalf("open %s: %v", location, err)
	}
	rf, ok := fs.(iceio.ReadFileIO)
	if !ok {
		t.Fatalf("the file system of %s cannot read whole files", location)
	}
	hint, err := rf.ReadFile(location + "/metadata/version-hint.text")
	if err != nil {
		t.Fatalf("read the version hint: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hint)))
	if err != nil {
		t.Fatalf("version hint %q: %v", hint, err)
	}
	loc := fmt.Sprintf("%s/metadata/v%d.metadata.json", location, n)
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"t"}, loc, iceio.LoadFSFunc(props, loc), nil)
	if err != nil {
		t.Fatalf("load %s: %v", loc, err)
	}
	return tbl
}

// Rows scans the current snapshot of tbl (or snapshot id, when not 0) and
// returns every row as column name to value, formatted by Format.
func Rows(t testing.TB, tbl *table.Table, snapshot int64) []map[string]string {
	t.Helper()
	var opts []table.ScanOption
	if snapshot != 0 {
		opts = append(opts, table.WithSnapshotID(snapshot))
	}
	_, recs, err := tbl.Scan(opts...).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var out []map[string]string
	for rec, err := range recs {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		sc := rec.Schema()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make(map[string]string, sc.NumFields())
			for j, f := range sc.Fields() {
				row[f.Name] = Format(rec.Column(j), i)
			}
			out = append(out, row)
		}
		rec.Release()
	}
	return out
}

// Format prints value i of a as PostgreSQL's text output prints it, with
// timestamps in UTC with six fractional digits (to_char's
// YYYY-MM-DD HH24:MI:SS.US): NULL for a null.
func Format(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "NULL"
	}
	switch a := a.(type) {
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i))
	case *array.Float32:
		return strconv.FormatFloat(float64(a.Value(i)), 'g', -1, 32)
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return `\x` + hex.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return `\x` + hex.EncodeToString(a.Value(i))
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Date32:
		return a.Value(i).ToTime().Format("2006-01-02")
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format("2006-01-02 15:04:05.000000")
	case *array.Time64:
		return a.Value(i).ToTime(a.DataType().(*arrow.Time64Type).Unit).Format("15:04:05.999999")
	case *array.List:
		start, end := a.ValueOffsets(i)
		return formatList(a.ListValues(), start, end)
	case *array.LargeList:
		start, end := a.ValueOffsets(i)
		return formatList(a.ListValues(), start, end)
	case array.ExtensionArray:
		return Format(a.Storage(), i)
	}
	return fmt.Sprintf("%v", a.GetOneForMarshal(i))
}

func formatList(vals arrow.Array, start, end int64) string {
	parts := make([]string, 0, end-start)
	for j := start; j < end; j++ {
		parts = append(parts, Format(vals, int(j)))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Latest keeps, per key, the row with the greatest (modified-at,
// _hw_version), and drops the keys whose latest row is a tombstone: the
// table as of its watermark, by dedupe's rule. Values compare as strings of
// equal format, so modified-at must be formatted to a fixed width.
func Latest(rows []map[string]string, key, modifiedAt string) map[string]map[string]string {
	best := map[string]map[string]string{}
	for _, r := range rows {
		k := r[key]
		b, ok := best[k]
		if !ok || r[modifiedAt] > b[modifiedAt] || (r[modifiedAt] == b[modifiedAt] && r["_hw_version"] > b["_hw_version"]) {
			best[k] = r
		}
	}
	for k, r := range best {
		if r["_hw_deleted"] == "true" {
			delete(best, k)
		}
	}
	return best
}
