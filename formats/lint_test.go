package formats

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
	pq "github.com/parquet-go/parquet-go"
)

// lintAllow lists the (physical, logical) pairs that Spark 3 and Athena
// engine 3 read; "" is no logical annotation. TIME and UUID are absent on
// purpose: they are written only when asked for (lintFile's allowOpt).
var lintAllow = map[string]bool{
	"BOOLEAN/":                              true,
	"INT32/":                                true,
	"INT64/":                                true,
	"INT32/Int(bitWidth=32, isSigned=true)": true, // how arrow-go reports a bare INT32
	"INT64/Int(bitWidth=64, isSigned=true)": true,
	"FLOAT/":                                true,
	"DOUBLE/":                               true,
	"BYTE_ARRAY/":                           true,
	"BYTE_ARRAY/String":                     true,
	"INT32/Date":                            true,
	"INT64/Timestamp(isAdjustedToUTC=true, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)":  true,
	"INT64/Timestamp(isAdjustedToUTC=false, timeUnit=microseconds, is_from_converted_type=false, force_set_converted_type=false)": true,
}

var lintOptional = map[string]bool{
	"INT64/Time(isAdjustedToUTC=false, timeUnit=microseconds)": true,
	"INT64/Time(isAdjustedToUTC=true, timeUnit=microseconds)":  true,
	"FIXED_LEN_BYTE_ARRAY/UUID":                                true,
}

// lintFile fails the test when a column of the file uses a type outside the
// allow-list, or a list that is not the standard 3-level form.
func lintFile(t *testing.T, path string, allowOpt bool) {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("lint: open: %v", err)
	}
	defer rdr.Close()
	if v := rdr.MetaData().KeyValueMetadata().FindValue(SparkVersionKey); v == nil || *v != SparkVersionValue {
		t.Errorf("lint: %s is missing from the footer", SparkVersionKey)
	}
	root := rdr.MetaData().Schema.Root()
	for i := 0; i < root.NumFields(); i++ {
		lintNode(t, root.Field(i), allowOpt)
	}
	lintPageIndex(t, path, rdr.NumRows())
}

// lintPageIndex opens the file with parquet-go's reader, which highwater's
// own dedupe uses and which reads the whole page index section at once,
// and reads every row through it.
func lintPageIndex(t *testing.T, path string, rows int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := pq.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatalf("lint: parquet-go open: %v", err)
	}
	n := int64(0)
	for _, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			if _, err := cc.ColumnIndex(); err != nil && !errors.Is(err, pq.ErrMissingColumnIndex) {
				t.Errorf("lint: column index of %v: %v", cc.Column(), err)
			}
		}
		rr := rg.Rows()
		buf := make([]pq.Row, 64)
		for {
			k, err := rr.ReadRows(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("lint: parquet-go read: %v", err)
			}
		}
		rr.Close()
	}
	if n != rows {
		t.Errorf("lint: parquet-go read %d rows, the footer says %d", n, rows)
	}
}

func lintNode(t *testing.T, n schema.Node, allowOpt bool) {
	t.Helper()
	if g, ok := n.(*schema.GroupNode); ok {
		// Standard LIST: optional group (LIST) { repeated group list { element } }.
		if _, isList := g.LogicalType().(schema.ListLogicalType); !isList || g.NumFields() != 1 {
			t.Errorf("lint: %s: group is not a LIST", n.Path())
			return
		}
		mid, ok := g.Field(0).(*schema.GroupNode)
		if !ok || mid.Name() != "list" || mid.RepetitionType() != parquet.Repetitions.Repeated || mid.NumFields() != 1 ||
			mid.Field(0).Name() != "element" {
			t.Errorf("lint: %s: LIST is not the 3-level list/element form", n.Path())
			return
		}
		lintNode(t, mid.Field(0), allowOpt)
		return
	}
	p := n.(*schema.PrimitiveNode)
	phys := p.PhysicalType().String()
	lt := p.LogicalType()
	logical := ""
	if lt != nil && !lt.IsNone() {
		logical = lt.String()
	}
	if d, ok := lt.(interface {
		Precision() int32
		Scale() int32
	}); ok {
		prec := int(d.Precision())
		okPhys := phys == "INT32" && prec <= 9 || phys == "INT64" && prec <= 18 ||
			phys == "FIXED_LEN_BYTE_ARRAY" && prec <= 38 && p.TypeLength() == decimalBytes(prec)
		if !okPhys || d.Scale() < 0 || d.Scale() > d.Precision() {
			t.Errorf("lint: %s: %s %s is not a decimal Spark and Athena read", n.Path(), phys, logical)
		}
		return
	}
	key := fmt.Sprintf("%s/%s", phys, logical)
	if !lintAllow[key] && !(allowOpt && lintOptional[key]) {
		t.Errorf("lint: %s: %s is not on the allow-list", n.Path(), key)
	}
}
