package formats

import (
	"fmt"
	"strings"
)

// Evolve decides whether files of schema next may join a model whose files
// so far have the (union) schema prev, and returns the new union schema for
// manifests and DDL: next's columns in order, then columns that only older
// files have, then the hidden columns.
//
// Readers resolve columns by name across files (DuckDB union_by_name, Spark
// and Athena with an explicit schema), so added and dropped columns are
// fine: files without a column read it as NULL. A change of type is not:
// Spark 3's Parquet reader fails on INT32 files read as bigint and on decimals
// whose precision or scale differ from the table's (widening only came with
// Spark 4, SPARK-40876), and Athena reads each file with the table's one type.
// So a column keeps its (physical, logical) type for the life of the model;
// changes of the PostgreSQL type that keep it, such as int2 to int4,
// varchar(n) to text or a domain to its base type, pass.
func Evolve(prev, next []Field) ([]Field, error) {
	if len(prev) == 0 {
		return append([]Field(nil), next...), nil
	}
	byName := make(map[string]Field, len(prev))
	byFold := make(map[string]string, len(prev))
	for _, f := range prev {
		byName[f.Name] = f
		byFold[strings.ToLower(f.Name)] = f.Name
	}
	var out []Field
	inNext := make(map[string]bool, len(next))
	for _, f := range next {
		if isHidden(f.Name) {
			continue
		}
		inNext[f.Name] = true
		old, ok := byName[f.Name]
		if !ok {
			// Spark (by default), Athena and Trino match names without case.
			if other, clash := byFold[strings.ToLower(f.Name)]; clash {
				return nil, fmt.Errorf("evolve schema: column %q differs from the existing column %q only by case, which Spark and Athena cannot tell apart; rename one, or rerun with --full-refresh once %q is gone", f.Name, other, other)
			}
			f.Nullable = true // older files lack it
			out = append(out, f)
			continue
		}
		if !sameParquetType(old, f) {
			return nil, fmt.Errorf("evolve schema: column %q changed from %s (%s) to %s (%s): a column keeps one Parquet type across all files of a model, since Spark 3 and Athena cannot read files whose types differ%s; rerun with --full-refresh to rewrite every file with the new type",
				f.Name, old.SourceType, parquetTypeString(old), f.SourceType, parquetTypeString(f), changeHint(old, f))
		}
		f.Nullable = f.Nullable || old.Nullable
		out = append(out, f)
	}
	for _, f := range prev {
		if isHidden(f.Name) || inNext[f.Name] {
			continue
		}
		f.Nullable = true // newer files lack it
		out = append(out, f)
	}
	for _, f := range next {
		if isHidden(f.Name) {
			out = append(out, f)
		}
	}
	return out, nil
}

func isHidden(name string) bool { return name == ColVersion || name == ColDeleted }

func sameParquetType(a, b Field) bool {
	return a.Physical == b.Physical && a.Logical == b.Logical && a.Repeated == b.Repeated &&
		a.Precision == b.Precision && a.Scale == b.Scale
}

func parquetTypeString(f Field) string {
	s := f.Physical
	if f.Logical != "" {
		s += " " + f.Logical
	}
	if f.Repeated {
		s = "LIST<" + s + ">"
	}
	return s
}

func changeHint(old, f Field) string {
	switch {
	case old.Physical == "INT32" && f.Physical == "INT64" && old.Logical == "" && f.Logical == "":
		return " (INT32 to INT64 needs Spark 4)"
	case strings.HasPrefix(old.Logical, "DECIMAL") && strings.HasPrefix(f.Logical, "DECIMAL"):
		return " (Spark 3 reads a decimal only at its exact precision and scale)"
	}
	return ""
}
