package dedupe

import (
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestRowRoundTrip covers both row forms: flat, and with an array column
// (repeated values, levels that the flat form cannot hold).
func TestRowRoundTrip(t *testing.T) {
	for name, row := range map[string]parquet.Row{
		"flat": {
			parquet.Int64Value(-7).Level(0, 1, 0),
			parquet.Value{}.Level(0, 0, 1),
			parquet.ByteArrayValue([]byte("x\x00y")).Level(0, 1, 2),
			parquet.BooleanValue(true).Level(0, 0, 3),
		},
		"array": {
			parquet.Int64Value(1).Level(0, 1, 0),
			parquet.Int32Value(10).Level(0, 3, 1),
			parquet.Int32Value(11).Level(1, 3, 1),
			parquet.Value{}.Level(1, 2, 1),
			parquet.DoubleValue(2.5).Level(0, 0, 2),
		},
	} {
		got, err := decodeRow(parquet.Row{parquet.Int64Value(99)}, encodeRow(nil, row))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got[1:].Equal(row) {
			t.Fatalf("%s: decoded %v, want %v", name, got[1:], row)
		}
	}
}
