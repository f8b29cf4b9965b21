package iceberg

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/highwater-dev/highwater/manifest"
)

// errEnabled: the log already publishes the model as Iceberg.
var errEnabled = errors.New("already published as Iceberg")

// Enable records in the log that the model is published as an Iceberg table
// from now on: a commit of kind table_format, unless the log says so
// already. It returns the state of the log with it.
func Enable(ctx context.Context, log *manifest.Log) (*manifest.State, error) {
	_, st, err := log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
		if st.Identity == nil {
			return nil, fmt.Errorf("model %s has no commits: export it first", log.Model())
		}
		if st.Publishes(manifest.TableFormatIceberg) {
			return nil, errEnabled
		}
		return &manifest.Commit{Kind: manifest.KindTableFormat, Identity: *st.Identity,
			Watermark: st.Watermark, FromFloor: st.FromFloor,
			TableFormats: append(slices.Clone(st.TableFormats), manifest.TableFormatIceberg)}, nil
	})
	if errors.Is(err, errEnabled) {
		return log.ReadState(ctx)
	}
	return st, err
}
