package formats

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// orderedGroup is a Parquet group whose fields keep the order they were
// given in. parquet.Group is a map and sorts its fields by name, which would
// put source columns in alphabetical order and break positional readers
// (Athena's default for Parquet is by name, but Spark DDL and people are not).
type orderedGroup struct {
	fields []parquet.Field
}

type namedNode struct {
	parquet.Node
	name string
}

func (f *namedNode) Name() string                      { return f.name }
func (f *namedNode) Value(reflect.Value) reflect.Value { return reflect.Value{} }

func newOrderedGroup(names []string, nodes []parquet.Node) *orderedGroup {
	g := &orderedGroup{fields: make([]parquet.Field, len(names))}
	for i := range names {
		g.fields[i] = &namedNode{Node: nodes[i], name: names[i]}
	}
	return g
}

func (g *orderedGroup) ID() int                     { return 0 }
func (g *orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g *orderedGroup) Optional() bool              { return false }
func (g *orderedGroup) Repeated() bool              { return false }
func (g *orderedGroup) Required() bool              { return true }
func (g *orderedGroup) Leaf() bool                  { return false }
func (g *orderedGroup) Fields() []parquet.Field     { return g.fields }
func (g *orderedGroup) Encoding() encoding.Encoding { return nil }
func (g *orderedGroup) Compression() compress.Codec { return nil }

func (g *orderedGroup) String() string {
	var b strings.Builder
	parquet.PrintSchema(&b, "", g)
	return b.String()
}

// GoType is only used by reflection-based reading and writing, which this
// package never does; it is built so that the Node contract still holds.
func (g *orderedGroup) GoType() reflect.Type {
	fields := make([]reflect.StructField, len(g.fields))
	for i, f := range g.fields {
		fields[i] = reflect.StructField{
			Name: "F" + strconv.Itoa(i),
			Type: f.GoType(),
			Tag:  reflect.StructTag(`parquet:"` + f.Name() + `"`),
		}
	}
	return reflect.StructOf(fields)
}
