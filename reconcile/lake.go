package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/lakeread"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/parquet-go/parquet-go"
)

// readLake reads every committed file, in committed order, and spills a
// record of each row. Only the columns the comparison needs are decoded:
// all of them for values, the key, modified-at and hidden columns with
// KeysOnly.
func (r *runner) readLake(ctx context.Context, parts *partitions) error {
	h := &hasher{sh: &r.shape}
	ch := newColumnHasher(&r.shape)
	// Row by row only when a list column must be hashed: columnHasher
	// reads flat columns.
	flat := r.opts.KeysOnly || !slices.ContainsFunc(r.mapping.Fields(), func(f formats.Field) bool { return f.Repeated })
	ncols := len(r.table.Columns) + 2
	for i, f := range r.st.Files {
		// The committed position and the row's place in its file break
		// exact ties, as dedupe's input order does.
		n := uint64(0)
		add := func(rec *record) error {
			rec.ordinal = uint64(i)<<36 | n
			n++
			r.maxVersion = max(r.maxVersion, rec.version)
			r.opts.Progress.Add(1)
			if parts.rows%measureRows == 0 {
				r.mem.measure()
			}
			return parts.add(rec)
		}
		var rec record
		err := r.readFile(ctx, f, func(pf *parquet.File) error {
			for j, rg := range pf.RowGroups() {
				var err error
				if flat {
					err = ch.group(ctx, rg, pf.Metadata().RowGroups[j].TotalByteSize, add)
				} else {
					err = lakeread.EachRow(ctx, rg, func(row parquet.Row) error {
						h.record(&rec, row, ncols)
						return add(&rec)
					})
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Key, err)
		}
	}
	return nil
}

// readFile opens a local copy of a committed file, checks its columns and
// calls fn with it.
func (r *runner) readFile(ctx context.Context, f manifest.File, fn func(*parquet.File) error) error {
	local, pf, err := lakeread.Open(ctx, r.bucket, r.log.Key(f.Key), func() (*os.File, error) {
		f, err := os.CreateTemp(r.spill, "input-*")
		if err != nil {
			return nil, fmt.Errorf("create a local copy: %w", err)
		}
		return f, nil
	})
	if err != nil {
		return err
	}
	defer lakeread.Discard(local)
	if err := r.checkFileSchema(pf.Schema()); err != nil {
		return err
	}
	return fn(pf)
}

// checkFileSchema refuses a file whose columns are not the mapping's: its
// values would be hashed at other positions.
func (r *runner) checkFileSchema(s *parquet.Schema) error {
	want := r.mapping.Schema().Columns()
	got := s.Columns()
	same := len(want) == len(got)
	for i := 0; same && i < len(want); i++ {
		same = strings.Join(want[i], ".") == strings.Join(got[i], ".")
	}
	if !same {
		return fmt.Errorf("%w: the file's columns are not the source's (the model's schema changed since): a --full-refresh export rewrites the model in one schema", ErrSchema)
	}
	return nil
}

// keyText renders a key as literals of the key columns' types, from the
// values the lake holds: they are the text forms for every type the
// mapping writes as text, and numbers, dates and timestamps otherwise.
func (r *runner) keyText(key []byte) ([]string, error) {
	vals, err := decodeKey(key, len(r.shape.key))
	if err != nil {
		return nil, err
	}
	fields := r.mapping.Fields()
	out := make([]string, len(vals))
	for j, v := range vals {
		f := fields[r.shape.key[j]]
		if out[j], err = valueText(v, f.Logical, f.Scale); err != nil {
			return nil, fmt.Errorf("render key column %q: %w", f.Name, err)
		}
	}
	return out, nil
}

func valueText(v parquet.Value, logical string, scale int) (string, error) {
	if v.IsNull() {
		return "", errors.New("NULL")
	}
	switch {
	case logical == "DATE":
		return watermark.Format(watermark.Date, watermark.Value(v.Int32())), nil
	case logical == "TIMESTAMP(MICROS,true)":
		return watermark.Format(watermark.Timestamptz, watermark.Value(v.Int64())), nil
	case logical == "TIMESTAMP(MICROS,false)":
		return watermark.Format(watermark.Timestamp, watermark.Value(v.Int64())), nil
	case logical == "UUID":
		b := v.ByteArray()
		if len(b) != 16 {
			return "", fmt.Errorf("a UUID of %d bytes", len(b))
		}
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
	case strings.HasPrefix(logical, "DECIMAL("):
		var unscaled *big.Int
		switch v.Kind() {
		case parquet.Int32:
			unscaled = big.NewInt(int64(v.Int32()))
		case parquet.Int64:
			unscaled = big.NewInt(v.Int64())
		default:
			b := v.ByteArray()
			unscaled = new(big.Int).SetBytes(b)
			if len(b) > 0 && b[0]&0x80 != 0 {
				unscaled.Sub(unscaled, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			}
		}
		return decimalText(unscaled, scale), nil
	}
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.FormatBool(v.Boolean()), nil
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10), nil
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10), nil
	case parquet.Float:
		return floatText(float64(v.Float()), 32), nil
	case parquet.Double:
		return floatText(v.Double(), 64), nil
	case parquet.ByteArray:
		if logical == "STRING" {
			return string(v.ByteArray()), nil
		}
		return `\x` + fmt.Sprintf("%x", v.ByteArray()), nil // bytea's hex form
	}
	return "", fmt.Errorf("no literal for a %s value", v.Kind())
}

func floatText(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

func decimalText(u *big.Int, scale int) string {
	neg := u.Sign() < 0
	s := new(big.Int).Abs(u).String()
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
