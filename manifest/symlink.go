package manifest

import (
	"context"
	"fmt"
	"strings"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// SymlinkManifestKey is where Athena, Presto and Trino find a symlink
// table's file list, relative to the model's root.
const SymlinkManifestKey = "_symlink_format_manifest/manifest"

// WriteSymlinkManifest rewrites the model's symlink-format manifest from
// the committed set, then checks that the head has not moved meanwhile. If
// it has, it writes again: the last writer to finish always wrote from the
// newest head, so a slow writer never leaves an older list behind.
func (l *Log) WriteSymlinkManifest(ctx context.Context, objectURL func(key string) string) error {
	return l.WriteSymlinkManifestFrom(ctx, nil, objectURL)
}

// WriteSymlinkManifestFrom is WriteSymlinkManifest starting from st, a
// state the caller already holds (the one its commit was folded into), so
// that the log is read again only if it moved.
func (l *Log) WriteSymlinkManifestFrom(ctx context.Context, st *State, objectURL func(key string) string) error {
	for range 20 {
		if st == nil {
			var err error
			if st, err = l.ReadState(ctx); err != nil {
				return err
			}
		}
		var b strings.Builder
		for _, f := range st.Files {
			b.WriteString(objectURL(l.Key(f.Key)))
			b.WriteByte('\n')
		}
		if err := l.bucket.Put(ctx, l.Key(SymlinkManifestKey), strings.NewReader(b.String()), objstore.PutOptions{ContentType: "text/plain"}); err != nil {
			return fmt.Errorf("write symlink manifest: %w", err)
		}
		head, err := l.HeadSince(ctx, st.Seq)
		if err != nil {
			return fmt.Errorf("check the head after writing the symlink manifest: %w", err)
		}
		if head == st.Seq {
			return nil
		}
		st = nil
	}
	return fmt.Errorf("write symlink manifest: the log kept moving")
}
