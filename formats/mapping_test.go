package formats

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
)

func TestOptionsTimeAndUUID(t *testing.T) {
	url := srv.NewDatabase(t)
	pgtest.Exec(t, url, `CREATE TABLE opt (id int, tm time, tz timetz, u uuid, atm time[], au uuid[])`,
		`INSERT INTO opt VALUES
		 (1, '13:14:15.5', '13:14:15.5+05:30', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{00:00:01,NULL}', '{00000000-0000-0000-0000-000000000001}'),
		 (2, '00:00:00', '01:00:00+02', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '{}', '{NULL}'),
		 (3, NULL, NULL, NULL, NULL, NULL)`)
	conn := connect(t, url)
	_, m := roundTrip(t, conn, "opt", Options{TimeAsParquetTime: true, UUIDLogical: true})
	got := map[string]string{}
	for _, f := range m.Fields() {
		got[f.Name] = f.Physical + " " + f.Logical
	}
	for name, want := range map[string]string{
		"tm": "INT64 TIME(MICROS,false)", "tz": "INT64 TIME(MICROS,true)",
		"u": "FIXED_LEN_BYTE_ARRAY UUID", "au": "FIXED_LEN_BYTE_ARRAY UUID",
	} {
		if got[name] != want {
			t.Errorf("field %s: %s, want %s", name, got[name], want)
		}
	}
}

func TestSchemaOrderAndHiddenColumns(t *testing.T) {
	url := srv.NewDatabase(t)
	pgtest.Exec(t, url, `CREATE TABLE ord (zeta int NOT NULL, alpha text, "Mixed Case" date, beta bigint)`,
		`INSERT INTO ord VALUES (1, 'a', '2020-01-01', 2), (2, NULL, NULL, NULL)`)
	conn := connect(t, url)
	cols := discover(t, conn, "ord")
	path, m := exportTable(t, conn, "ord", cols, Options{}, WriterOptions{Compression: "snappy", KeyValue: map[string]string{"highwater.run": "r1"}})
	want := []string{"zeta", "alpha", "Mixed Case", "beta", ColVersion, ColDeleted}
	var names []string
	for _, f := range m.Schema().Fields() {
		names = append(names, f.Name())
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("schema order %v, want %v", names, want)
	}
	for i, f := range m.Fields() {
		if f.Name != want[i] {
			t.Fatalf("Fields order: %d is %s, want %s", i, f.Name, want[i])
		}
	}
	rows := readDuck(t, path, m.Fields())
	wantVersion := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	for _, r := range rows {
		if v, ok := r[4].(time.Time); !ok || !v.Equal(wantVersion) {
			t.Errorf("_hw_version = %v, want %v", r[4], wantVersion)
		}
		if r[5] != false {
			t.Errorf("_hw_deleted = %v, want false", r[5])
		}
	}
	if rows[1][1] != nil || rows[1][2] != nil || rows[1][3] != nil {
		t.Errorf("NULLs read back as %v", rows[1])
	}
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	kv := rdr.MetaData().KeyValueMetadata()
	for k, v := range map[string]string{SparkVersionKey: SparkVersionValue, "highwater.run": "r1", "highwater.model": "types"} {
		if got := kv.FindValue(k); got == nil || *got != v {
			t.Errorf("footer %s = %v, want %s", k, got, v)
		}
	}
	s := rdr.MetaData().Schema
	for i := 0; i < 4; i++ {
		if s.Column(i).SchemaNode().RepetitionType().String() != "optional" {
			t.Errorf("column %s is %s, want OPTIONAL", s.Column(i).Name(), s.Column(i).SchemaNode().RepetitionType())
		}
	}
	for i := 4; i < 6; i++ {
		if s.Column(i).SchemaNode().RepetitionType().String() != "required" {
			t.Errorf("column %s is %s, want REQUIRED", s.Column(i).Name(), s.Column(i).SchemaNode().RepetitionType())
		}
	}
	if c, _ := rdr.MetaData().RowGroup(0).ColumnChunk(0); c.Compression().String() != "SNAPPY" {
		t.Errorf("compression %s, want SNAPPY", c.Compression())
	}
}

// appendOne runs a single-column query in binary format and appends its
// first row.
func appendOne(t *testing.T, conn *pgx.Conn, col Column, expr string) error {
	t.Helper()
	m, err := NewMapping([]Column{col}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(context.Background(), "SELECT "+m.SelectExprs([]string{expr})[0], pgx.QueryResultFormats{pgx.BinaryFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no row: %v", rows.Err())
	}
	_, err = m.AppendRow(nil, rows.RawValues(), 0, false)
	return err
}

func TestValuesThatCannotBeWritten(t *testing.T) {
	conn := connect(t, srv.NewDatabase(t))
	for _, tc := range []struct {
		col  Column
		expr string
		want string
	}{
		{Column{Name: "m", TypeOID: 1007, ElemOID: oidInt4, Typmod: -1}, "'{{1,2},{3,4}}'::int[]", `column "m": a 2-dimensional array`},
		{Column{Name: "n", TypeOID: oidNumeric, Typmod: 5<<16 | 2 + 4}, "'NaN'::numeric(5,2)", `column "n" as DECIMAL(5,2): NaN`},
		{Column{Name: "w", TypeOID: oidNumeric, Typmod: 5<<16 | 2 + 4}, "123.456::numeric", `more than 2 decimal places`},
		{Column{Name: "w", TypeOID: oidNumeric, Typmod: 5<<16 | 2 + 4}, "1234.5::numeric", `exceeds 5 digits`},
		{Column{Name: "ts", TypeOID: oidTimestamp, Typmod: -1}, "'294270-01-01'::timestamp", `column "ts": timestamp beyond`},
	} {
		err := appendOne(t, conn, tc.col, tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.expr, err, tc.want)
		} else if !strings.Contains(err.Error(), "full-refresh") && tc.col.Name != "ts" {
			t.Errorf("%s: error %v names no remedy", tc.expr, err)
		}
	}
}

func TestUnconstrainedNumericIsText(t *testing.T) {
	for _, typmod := range []int32{-1, 50<<16 | 10 + 4} {
		m, err := NewMapping([]Column{{Name: "n", TypeOID: oidNumeric, Typmod: typmod}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f := m.Fields()[0]
		if f.Physical != "BYTE_ARRAY" || f.Logical != "STRING" || m.SelectExprs([]string{`"n"`})[0] != `"n"::text` {
			t.Errorf("typmod %d: %+v, select %s", typmod, f, m.SelectExprs([]string{`"n"`})[0])
		}
	}
}

func TestReservedNames(t *testing.T) {
	if _, err := NewMapping([]Column{{Name: "_hw_version", TypeOID: oidInt4}}, Options{}); err == nil {
		t.Error("a source column named _hw_version was accepted")
	}
}

func TestRowGroupsAndBufferedBytes(t *testing.T) {
	m, err := NewMapping([]Column{{Name: "id", TypeOID: oidInt8}, {Name: "s", TypeOID: oidText}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(t.TempDir() + "/rg.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fw, err := NewFileWriter(f, m.Schema(), WriterOptions{RowGroupRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	var rows []parquet.Row
	id := make([]byte, 8)
	s := []byte(strings.Repeat("x", 100))
	for i := 0; i < 250; i++ {
		id[7] = byte(i)
		r, err := m.AppendRow(nil, [][]byte{id, s}, int64(i), i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if fw.BufferedBytes() != 0 {
		t.Errorf("BufferedBytes before any row = %d", fw.BufferedBytes())
	}
	if _, err := fw.WriteRows(rows[:50]); err != nil {
		t.Fatal(err)
	}
	if b := fw.BufferedBytes(); b < 50*100 {
		t.Errorf("BufferedBytes after 50 rows of 100 bytes = %d", b)
	}
	if _, err := fw.WriteRows(rows[50:]); err != nil {
		t.Fatal(err)
	}
	if b := fw.BufferedBytes(); b < 50*100 || b > 50*100*4 {
		t.Errorf("BufferedBytes with 50 rows in the open group = %d", b)
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if b := fw.BufferedBytes(); b != 0 {
		t.Errorf("BufferedBytes after Flush = %d", b)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	rdr, err := file.OpenParquetFile(f.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	var sizes []int64
	for i := 0; i < rdr.NumRowGroups(); i++ {
		sizes = append(sizes, rdr.MetaData().RowGroup(i).NumRows())
	}
	if len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 50 {
		t.Errorf("row groups %v, want [100 100 50]", sizes)
	}
	if c, _ := rdr.MetaData().RowGroup(0).ColumnChunk(0); c.Compression().String() != "ZSTD" {
		t.Errorf("default compression %s, want ZSTD", c.Compression())
	}
}
