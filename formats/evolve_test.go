package formats

import (
	"strings"
	"testing"
)

func mustFields(t *testing.T, cols ...Column) []Field {
	t.Helper()
	m, err := NewMapping(cols, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Fields()
}

func names(fs []Field) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Name)
	}
	return strings.Join(s, ",")
}

func TestEvolve(t *testing.T) {
	numeric := func(p, s int) int32 { return int32(p<<16|s) + 4 }
	id := Column{Name: "id", TypeOID: oidInt8, TypeName: "bigint"}
	base := mustFields(t, id,
		Column{Name: "small", TypeOID: oidInt2, TypeName: "smallint"},
		Column{Name: "name", TypeOID: oidVarchar, Typmod: 14, TypeName: "character varying(10)"},
		Column{Name: "gone", TypeOID: oidDate, TypeName: "date"},
		Column{Name: "amount", TypeOID: oidNumeric, Typmod: numeric(10, 2), TypeName: "numeric(10,2)"})

	t.Run("compatible", func(t *testing.T) {
		next := mustFields(t, id,
			Column{Name: "small", TypeOID: oidInt4, TypeName: "integer"}, // int2 -> int4: both INT32
			Column{Name: "name", TypeOID: oidText, TypeName: "text"},     // varchar(n) -> text
			Column{Name: "amount", TypeOID: oidNumeric, Typmod: numeric(10, 2), TypeName: "numeric(10,2)"},
			Column{Name: "added", TypeOID: oidBool, TypeName: "boolean"}) // gone is dropped
		got, err := Evolve(base, next)
		if err != nil {
			t.Fatalf("evolve: %v", err)
		}
		if want := "id,small,name,amount,added,gone,_hw_version,_hw_deleted"; names(got) != want {
			t.Fatalf("union %s, want %s", names(got), want)
		}
		if got[1].SourceType != "integer" || got[2].SourceType != "text" {
			t.Errorf("union keeps the old source types: %+v", got[1:3])
		}
		for _, f := range got[:6] {
			if !f.Nullable {
				t.Errorf("%s is not nullable in the union", f.Name)
			}
		}
		// A column dropped and later re-added with its old type is fine.
		again, err := Evolve(got, base)
		if err != nil {
			t.Fatalf("re-add: %v", err)
		}
		if want := "id,small,name,gone,amount,added,_hw_version,_hw_deleted"; names(again) != want {
			t.Errorf("union %s, want %s", names(again), want)
		}
	})

	for _, tc := range []struct {
		name string
		col  Column
		want []string
	}{
		{"int2 to int8", Column{Name: "small", TypeOID: oidInt8, TypeName: "bigint"},
			[]string{`column "small"`, "smallint", "INT32", "bigint", "INT64", "Spark 4", "--full-refresh"}},
		{"decimal precision", Column{Name: "amount", TypeOID: oidNumeric, Typmod: numeric(12, 2), TypeName: "numeric(12,2)"},
			[]string{`column "amount"`, "DECIMAL(10,2)", "DECIMAL(12,2)", "--full-refresh"}},
		{"varchar to int", Column{Name: "name", TypeOID: oidInt4, TypeName: "integer"},
			[]string{`column "name"`, "BYTE_ARRAY STRING", "INT32", "--full-refresh"}},
		{"scalar to array", Column{Name: "gone", TypeOID: 1182, ElemOID: oidDate, TypeName: "date[]"},
			[]string{`column "gone"`, "LIST<INT32 DATE>", "--full-refresh"}},
		{"case clash", Column{Name: "NAME", TypeOID: oidText, TypeName: "text"},
			[]string{`column "NAME"`, `"name"`, "case"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cols []Column
			for _, f := range base[:len(base)-2] {
				if f.Name != tc.col.Name {
					cols = append(cols, Column{Name: f.Name, TypeOID: oidText, TypeName: "text"})
				}
			}
			next := mustFields(t, append([]Column{tc.col}, cols...)...)
			// keep the other columns at their old types
			for i, f := range next {
				for _, b := range base {
					if b.Name == f.Name && f.Name != tc.col.Name {
						next[i] = b
					}
				}
			}
			_, err := Evolve(base, next)
			if err == nil {
				t.Fatal("evolve accepted an incompatible change")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
