package iceberg

import (
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/highwater-dev/highwater/formats"
)

// icebergType is the Iceberg type that reads a column as formats writes it.
// The Parquet files carry no field IDs; readers find the columns through the
// table's name mapping (see nameMappingProperty).
func icebergType(f formats.Field) (iceberg.Type, error) {
	var t iceberg.Type
	switch {
	case f.Precision > 0:
		t = iceberg.DecimalTypeOf(f.Precision, f.Scale)
	case f.Physical == "BOOLEAN":
		t = iceberg.PrimitiveTypes.Bool
	case f.Physical == "INT32" && f.Logical == "":
		t = iceberg.PrimitiveTypes.Int32
	case f.Physical == "INT32" && f.Logical == "DATE":
		t = iceberg.PrimitiveTypes.Date
	case f.Physical == "INT64" && f.Logical == "":
		t = iceberg.PrimitiveTypes.Int64
	case f.Physical == "INT64" && f.Logical == "TIMESTAMP(MICROS,false)":
		t = iceberg.PrimitiveTypes.Timestamp
	case f.Physical == "INT64" && f.Logical == "TIMESTAMP(MICROS,true)":
		t = iceberg.PrimitiveTypes.TimestampTz
	case f.Physical == "INT64" && f.Logical == "TIME(MICROS,false)":
		t = iceberg.PrimitiveTypes.Time
	case f.Physical == "FLOAT":
		t = iceberg.PrimitiveTypes.Float32
	case f.Physical == "DOUBLE":
		t = iceberg.PrimitiveTypes.Float64
	case f.Physical == "BYTE_ARRAY" && f.Logical == "STRING":
		t = iceberg.PrimitiveTypes.String
	case f.Physical == "BYTE_ARRAY" && f.Logical == "":
		t = iceberg.PrimitiveTypes.Binary
	case f.Physical == "FIXED_LEN_BYTE_ARRAY" && f.Logical == "UUID":
		t = iceberg.PrimitiveTypes.UUID
	default:
		// TIME(MICROS,true) above all: Iceberg's time has no zone. The
		// default mapping writes timetz as a string, which reads fine.
		return nil, fmt.Errorf("column %q is written as %s %s, which no Iceberg type reads; write it as a string (the default mapping)", f.Name, f.Physical, f.Logical)
	}
	if f.Repeated {
		// The element id is assigned by the schema that holds the list.
		t = &iceberg.ListType{Element: t}
	}
	return t, nil
}

// newSchema builds the Iceberg schema of fields, with ids 1.. in column
// order and the list elements' ids after them, as Iceberg assigns them.
func newSchema(fields []formats.Field) (*iceberg.Schema, error) {
	out := make([]iceberg.NestedField, 0, len(fields))
	next := len(fields) + 1
	for i, f := range fields {
		t, err := icebergType(f)
		if err != nil {
			return nil, err
		}
		if l, ok := t.(*iceberg.ListType); ok {
			l.ElementID, next = next, next+1
		}
		out = append(out, iceberg.NestedField{ID: i + 1, Name: f.Name, Type: t, Required: !f.Nullable})
	}
	return iceberg.NewSchema(0, out...), nil
}

// evolveSchema stages in tx the schema change that makes cur read fields:
// new columns are added (optional, as formats writes every source column);
// a column whose type changed is dropped and added again under a new id,
// which only a full refresh may do, since only it rewrites every file.
// It reports whether the schema changed.
func evolveSchema(tx *table.Transaction, cur *iceberg.Schema, fields []formats.Field, fullRefresh bool) (bool, error) {
	var changed, added []formats.Field
	for _, f := range fields {
		want, err := icebergType(f)
		if err != nil {
			return false, err
		}
		old, ok := cur.FindFieldByName(f.Name)
		switch {
		case !ok:
			added = append(added, f)
		case !sameType(old.Type, want):
			if !fullRefresh {
				return false, fmt.Errorf("column %q changed from %s to %s: only a full refresh may change a column's type", f.Name, old.Type, want)
			}
			changed = append(changed, f)
		}
	}
	if len(added) == 0 && len(changed) == 0 {
		return false, nil
	}
	// One update: a transaction's second schema update would assert the
	// schema id that its first one staged.
	u := tx.UpdateSchema(true, len(changed) > 0)
	for _, f := range changed {
		u.DeleteColumn([]string{f.Name})
	}
	for _, f := range append(added, changed...) {
		t, _ := icebergType(f)
		u.AddColumn([]string{f.Name}, t, "", false, nil)
	}
	if err := u.Commit(); err != nil {
		return false, fmt.Errorf("update the Iceberg schema: %w", err)
	}
	return true, nil
}

// sameType compares types ignoring the ids of nested fields.
func sameType(a, b iceberg.Type) bool {
	la, aList := a.(*iceberg.ListType)
	lb, bList := b.(*iceberg.ListType)
	if aList || bList {
		return aList && bList && sameType(la.Element, lb.Element)
	}
	return a.Equals(b)
}
