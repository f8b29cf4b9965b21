package formats

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// enc says how one binary wire value becomes one Parquet value.
type enc uint8

const (
	encInt16 enc = iota + 1
	encInt32
	encInt64
	encOID
	encFloat32
	encFloat64
	encBool
	encText  // UTF-8 bytes as they come, also every ::text cast
	encBytes // bytea
	encDecimal32
	encDecimal64
	encDecimal128
	encDate
	encTimestamp
	encTimeText
	encTimeTZText
	encTimeMicros
	encTimeTZMicros
	encIntervalText
	encUUIDText
	encUUIDBytes
)

// Built-in type OIDs (pg_type.h); they are fixed across PostgreSQL versions.
const (
	oidBool        = 16
	oidBytea       = 17
	oidChar        = 18
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidOID         = 26
	oidXML         = 142
	oidCIDR        = 650
	oidFloat4      = 700
	oidFloat8      = 701
	oidMoney       = 790
	oidInet        = 869
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidTimetz      = 1266
	oidNumeric     = 1700
	oidUUID        = 2950
)

// maxDecimalPrecision is the widest DECIMAL that Spark 3 and Athena read.
const maxDecimalPrecision = 38

type column struct {
	name  string
	enc   enc
	list  bool
	cast  string // appended to the quoted identifier in SelectExprs
	out   bool   // selected through the output function instead (outputExpr)
	prec  int    // decimals
	scale int    // decimals: the Parquet scale
	flba  int    // byte width of FIXED_LEN_BYTE_ARRAY decimals
	node  parquet.Node
	field Field
}

// Mapping turns rows of one source schema into Parquet rows. It is built
// once per run and is safe for use by one goroutine.
type Mapping struct {
	cols   []column
	schema *parquet.Schema
	fields []Field
	arena  arena
	// maxDef is the definition level of a present value per column.
	nsrc int
}

// NewMapping maps the columns to Parquet, or says which column has a type
// it cannot write.
func NewMapping(cols []Column, opts Options) (*Mapping, error) {
	m := &Mapping{nsrc: len(cols)}
	names := make([]string, 0, len(cols)+2)
	nodes := make([]parquet.Node, 0, len(cols)+2)
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		if strings.HasPrefix(c.Name, "_hw_") {
			return nil, fmt.Errorf("map column %q: the _hw_ prefix is reserved for highwater's own columns", c.Name)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("map column %q: the name appears twice", c.Name)
		}
		seen[c.Name] = true
		col, err := planColumn(c, opts)
		if err != nil {
			return nil, err
		}
		m.cols = append(m.cols, col)
		m.fields = append(m.fields, col.field)
		names = append(names, c.Name)
		nodes = append(nodes, col.node)
	}
	names = append(names, ColVersion, ColDeleted)
	nodes = append(nodes,
		parquet.Required(parquet.TimestampAdjusted(parquet.Microsecond, true)),
		parquet.Required(parquet.Leaf(parquet.BooleanType)))
	m.fields = append(m.fields,
		Field{Name: ColVersion, SourceType: "highwater", Physical: "INT64", Logical: "TIMESTAMP(MICROS,true)"},
		Field{Name: ColDeleted, SourceType: "highwater", Physical: "BOOLEAN"})
	m.schema = parquet.NewSchema("highwater", newOrderedGroup(names, nodes))
	return m, nil
}

// planColumn chooses the Parquet type of one source column. Every source
// column is OPTIONAL, even NOT NULL ones: a constraint dropped later must not
// change the file schema, and engines union OPTIONAL files without fuss.
func planColumn(c Column, opts Options) (column, error) {
	col := column{name: c.Name}
	oid, typmod, typtype := c.TypeOID, c.Typmod, c.TypType
	if c.ElemOID != 0 {
		col.list = true
		oid, typtype = c.ElemOID, c.ElemTypType
	}
	scalar := scalarPlan(oid, typmod, typtype, opts)
	col.enc, col.prec, col.scale = scalar.enc, scalar.prec, scalar.scale
	col.cast, col.out = scalar.cast, scalar.out
	if col.list && col.cast != "" {
		col.cast = scalar.arrayCast
	}
	leaf := leafNode(scalar)
	col.field = Field{
		Name:       c.Name,
		SourceType: c.TypeName,
		Physical:   scalar.physical,
		Logical:    scalar.logical,
		Repeated:   col.list,
		Precision:  scalar.prec,
		Scale:      scalar.scale,
		Nullable:   true,
	}
	if scalar.enc == encDecimal128 {
		col.flba = decimalBytes(scalar.prec)
	}
	if col.list {
		col.node = parquet.Optional(parquet.List(parquet.Optional(leaf)))
	} else {
		col.node = parquet.Optional(leaf)
	}
	return col, nil
}

type scalar struct {
	enc       enc
	cast      string // for a scalar column
	arrayCast string // for an array column of this element type
	out       bool   // see outputExpr
	physical  string
	logical   string
	prec      int
	scale     int
}

// textScalar writes a type in its text form: exactly what its output
// function prints, as psql and COPY show it. A cast to text is that output
// for every type without a cast of its own to text (PostgreSQL then converts
// through the output function); the built-in types that have one are
// listed in scalarPlan.
var textScalar = scalar{enc: encText, cast: "::text", arrayCast: "::text[]", physical: "BYTE_ARRAY", logical: "STRING"}

// scalarPlan maps one (resolved) type. What is not listed is written in its
// PostgreSQL text form: enums, ranges, composites, json, network and bit
// types, geometric types, extension types such as citext.
func scalarPlan(oid uint32, typmod int32, typtype byte, opts Options) scalar {
	str := scalar{enc: encText, physical: "BYTE_ARRAY", logical: "STRING"}
	switch oid {
	case oidInt2:
		return scalar{enc: encInt16, physical: "INT32"}
	case oidInt4:
		return scalar{enc: encInt32, physical: "INT32"}
	case oidInt8:
		return scalar{enc: encInt64, physical: "INT64"}
	case oidOID:
		// Unsigned 32 bits do not fit INT32, and unsigned logical types are
		// not on the allow-list.
		return scalar{enc: encOID, physical: "INT64"}
	case oidFloat4:
		return scalar{enc: encFloat32, physical: "FLOAT"}
	case oidFloat8:
		return scalar{enc: encFloat64, physical: "DOUBLE"}
	case oidBool:
		return scalar{enc: encBool, physical: "BOOLEAN"}
	case oidText, oidVarchar, oidBpchar, oidName:
		return str
	case oidBytea:
		return scalar{enc: encBytes, physical: "BYTE_ARRAY"}
	case oidDate:
		return scalar{enc: encDate, physical: "INT32", logical: "DATE"}
	case oidTimestamp:
		return scalar{enc: encTimestamp, physical: "INT64", logical: "TIMESTAMP(MICROS,false)"}
	case oidTimestamptz:
		return scalar{enc: encTimestamp, physical: "INT64", logical: "TIMESTAMP(MICROS,true)"}
	case oidTime:
		if opts.TimeAsParquetTime {
			return scalar{enc: encTimeMicros, physical: "INT64", logical: "TIME(MICROS,false)"}
		}
		str.enc = encTimeText
		return str
	case oidTimetz:
		if opts.TimeAsParquetTime {
			return scalar{enc: encTimeTZMicros, physical: "INT64", logical: "TIME(MICROS,true)"}
		}
		str.enc = encTimeTZText
		return str
	case oidInterval:
		str.enc = encIntervalText
		return str
	case oidUUID:
		if opts.UUIDLogical {
			return scalar{enc: encUUIDBytes, physical: "FIXED_LEN_BYTE_ARRAY", logical: "UUID"}
		}
		str.enc = encUUIDText
		return str
	case oidNumeric:
		return numericPlan(typmod)
	case oidInet, oidCIDR, oidXML, oidChar:
		// Their casts to text are functions of their own, not the output:
		// inet::text adds a /32 that inet prints only for other masks, and
		// xml::text keeps the declaration that xml's output drops.
		s := textScalar
		s.cast, s.arrayCast, s.out = "", "", true
		return s
	case oidMoney:
		// money's text form carries a locale's currency symbol and grouping;
		// numeric's does not, and keeps every digit.
		s := textScalar
		s.cast, s.arrayCast = "::numeric::text", "::numeric[]::text[]"
		return s
	}
	return textScalar
}

// numericPlan writes numeric(p,s) as an exact DECIMAL when it fits 38
// digits. Unconstrained or wider numerics are written as their exact text:
// no DECIMAL(p,s) can hold every value they may hold, and a guess would fail
// or round later.
func numericPlan(typmod int32) scalar {
	if typmod < 4 {
		return textScalar
	}
	p := int((typmod - 4) >> 16 & 0xffff)
	s := int(((typmod-4)&0x7ff)^1024) - 1024 // PostgreSQL 15 allows negative scales
	// Parquet wants 0 <= scale <= precision. numeric(2,-3) holds multiples of
	// 1000 up to 99000: DECIMAL(5,0). numeric(3,5) holds up to 0.00999:
	// DECIMAL(5,5).
	if s < 0 {
		p, s = p-s, 0
	} else if s > p {
		p = s
	}
	if p < 1 || p > maxDecimalPrecision {
		return textScalar
	}
	logical := fmt.Sprintf("DECIMAL(%d,%d)", p, s)
	switch {
	case p <= 9:
		return scalar{enc: encDecimal32, physical: "INT32", logical: logical, prec: p, scale: s}
	case p <= 18:
		return scalar{enc: encDecimal64, physical: "INT64", logical: logical, prec: p, scale: s}
	}
	return scalar{enc: encDecimal128, physical: "FIXED_LEN_BYTE_ARRAY", logical: logical, prec: p, scale: s}
}

func leafNode(s scalar) parquet.Node {
	switch s.enc {
	case encInt16, encInt32:
		return parquet.Leaf(parquet.Int32Type)
	case encInt64, encOID:
		return parquet.Leaf(parquet.Int64Type)
	case encFloat32:
		return parquet.Leaf(parquet.FloatType)
	case encFloat64:
		return parquet.Leaf(parquet.DoubleType)
	case encBool:
		return parquet.Leaf(parquet.BooleanType)
	case encBytes:
		return parquet.Leaf(parquet.ByteArrayType)
	case encDecimal32:
		return parquet.Decimal(s.scale, s.prec, parquet.Int32Type)
	case encDecimal64:
		return parquet.Decimal(s.scale, s.prec, parquet.Int64Type)
	case encDecimal128:
		return parquet.Decimal(s.scale, s.prec, parquet.FixedLenByteArrayType(decimalBytes(s.prec)))
	case encDate:
		return parquet.Date()
	case encTimestamp:
		return parquet.TimestampAdjusted(parquet.Microsecond, s.logical == "TIMESTAMP(MICROS,true)")
	case encTimeMicros:
		return parquet.TimeAdjusted(parquet.Microsecond, false)
	case encTimeTZMicros:
		return parquet.TimeAdjusted(parquet.Microsecond, true)
	case encUUIDBytes:
		return parquet.UUID()
	}
	return parquet.String()
}

// SelectExprs returns, in column order, the SQL expression to select for
// each source column given its quoted identifier: the identifier itself,
// or a cast such as `"c"::text` for types written in their text form.
// Results are always requested in binary format.
func (m *Mapping) SelectExprs(quotedIdents []string) []string {
	out := make([]string, len(quotedIdents))
	for i, id := range quotedIdents {
		switch {
		case i < len(m.cols) && m.cols[i].out:
			out[i] = outputExpr(id, m.cols[i].list)
		case i < len(m.cols) && m.cols[i].cast != "":
			out[i] = id + m.cols[i].cast
		default:
			out[i] = id
		}
	}
	return out
}

// outputExpr selects a value as text through its type's output function,
// for the types whose cast to text is something else. format's %s is that
// function, but it makes ” of a NULL. An array's own output applies the
// element output to each element and quotes it, and text[]'s input undoes
// exactly that quoting while keeping NULL elements, dimensions and bounds;
// the element types it is used for all delimit with a comma, as text does.
func outputExpr(id string, list bool) string {
	if list {
		return id + "::pg_catalog.text::pg_catalog.text[]"
	}
	return "CASE WHEN " + id + " IS NULL THEN NULL ELSE pg_catalog.format('%s', " + id + ") END"
}

// Schema is the Parquet schema of the files: the source columns in order,
// then _hw_version and _hw_deleted.
func (m *Mapping) Schema() *parquet.Schema { return m.schema }

// Fields describes Schema for manifests and DDL.
func (m *Mapping) Fields() []Field {
	out := make([]Field, len(m.fields))
	copy(out, m.fields)
	return out
}
