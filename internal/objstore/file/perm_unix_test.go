//go:build unix

package file_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/file"
)

// TestPermissionsFollowUmask checks that objects and the directories made for
// them get the modes the umask allows, so another user can read the lake.
//
// The umask is process-wide, so this test must not run beside another: it
// does not call t.Parallel, and a sequential top-level test runs alone.
func TestPermissionsFollowUmask(t *testing.T) {
	for _, tc := range []struct {
		umask     int
		file, dir fs.FileMode
	}{
		{0o022, 0o644, 0o755},
		{0o027, 0o640, 0o750},
		{0o077, 0o600, 0o700},
		{0o002, 0o664, 0o775},
	} {
		t.Run(fmt.Sprintf("umask%03o", tc.umask), func(t *testing.T) {
			old := syscall.Umask(tc.umask)
			t.Cleanup(func() { syscall.Umask(old) })

			root := filepath.Join(t.TempDir(), "lake")
			b, err := file.New(root)
			if err != nil {
				t.Fatal(err)
			}
			keys := map[string]objstore.PutOptions{
				"m/data/run/attempt/part-0.parquet":      {},
				"m/_manifests/00000000000000000001.json": {IfNotExist: true},
			}
			for key, opts := range keys {
				if err := b.Put(t.Context(), key, strings.NewReader("x"), opts); err != nil {
					t.Fatal(err)
				}
			}
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := os.Lstat(p)
				if err != nil {
					return err
				}
				want := tc.file
				if d.IsDir() {
					want = tc.dir
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("umask %03o: %s has mode %v, want %v", tc.umask, p, got, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
