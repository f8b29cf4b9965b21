package reconcile

import (
	"bytes"
	"context"
	"fmt"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/parquet-go/parquet-go"
)

// SetJudging makes a reconcile judge judges partitions at once, each in a
// share of share bytes. The number of partitions stays what the budget
// makes it, so a small share makes partitions split again.
func (o *Options) SetJudging(judges int, share int64) { o.judges, o.share = judges, share }

// CheckWireHash reads every row of spec's table and compares the record
// that a reconcile makes of its wire values (wireHasher) with the one that
// hasher makes of the Parquet row the mapping converts them to, as the
// lake's files hold it, under the mapping's options fo. It returns how
// many rows agreed, or the first that did not.
func CheckWireHash(ctx context.Context, src *pgsource.Source, spec pgsource.Spec, fo formats.Options, keysOnly bool) (int, error) {
	t, err := src.Discover(ctx, spec)
	if err != nil {
		return 0, err
	}
	m, err := formats.NewMapping(t.Columns, fo)
	if err != nil {
		return 0, err
	}
	sh := newRowShape(len(t.Columns), t.KeyColumns(), t.ModColumn(), keysOnly)
	wire, rows := newWireHasher(&sh, m), &hasher{sh: &sh}
	var row parquet.Row
	n := 0
	err = src.NewKeyScanner(t, m.SelectExprs(t.Quoted())).Scan(ctx, pgsource.Window{}, func(sr *pgsource.Row) error {
		var want, got record
		if row, err = m.AppendRow(row, sr.Values, 0, false); err != nil {
			return err
		}
		rows.record(&want, row, len(t.Columns)+2)
		want.key = bytes.Clone(want.key)
		if err := wire.record(&got, sr.Values); err != nil {
			return err
		}
		if got.flags != want.flags || got.mod != want.mod || got.hash != want.hash || !bytes.Equal(got.key, want.key) {
			return fmt.Errorf("row %d: from the wire values flags %d mod %d hash %x key %x, from the Parquet row flags %d mod %d hash %x key %x",
				n, got.flags, got.mod, got.hash, got.key, want.flags, want.mod, want.hash, want.key)
		}
		n++
		return nil
	})
	return n, err
}
