package main

import (
	"io"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestFilesPrintsURLsThatRoundTrip exports a tenant and a model whose
// names hold spaces, '%', '#', '?' and non-ASCII letters into a
// destination whose own path has a space, and opens each URL that files
// prints as a URL: parsed, split into its directory and name, and opened
// through the destination registry, it must name the committed object.
func TestFilesPrintsURLsThatRoundTrip(t *testing.T) {
	const tenant = "a b%20c#d?e=ü/f"
	const model = "ord ers%#?ü"
	for _, store := range []struct {
		name string
		root func(testing.TB) string
	}{
		{"file", func(t testing.TB) string {
			return "file://" + (&url.URL{Path: t.TempDir()}).EscapedPath() + "/my%20lake"
		}},
		{"s3", cloudtest.S3},
	} {
		t.Run(store.name, func(t *testing.T) {
			dest := store.root(t) + "/{tenant}"
			db, _ := setupItems(t)
			pgtest.Exec(t, db, `CREATE UNIQUE INDEX ON items (name, id)`, `UPDATE items SET name = '`+tenant+`' WHERE id <= 20`)
			code, _, errOut := highwater(t, "export", "--source", db, "--table", "public.items", "--model", model, "--primary-key", "id",
				"--modified-at", "updated_at", "--dest", dest, "--tenant-column", "name", "--tenant", tenant)
			if code != 0 {
				t.Fatalf("export: %s", errOut)
			}
			code, out, errOut := highwater(t, "files", "--dest", dest, "--tenant", tenant, "--model", model)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if code != 0 || len(lines) != 1 {
				t.Fatalf("files: exit %d: %q %s", code, out, errOut)
			}
			for _, line := range lines {
				u, err := url.Parse(line)
				if err != nil || u.String() != line || u.Fragment != "" || u.RawQuery != "" {
					t.Fatalf("files printed %q, which is not one escaped URL (%v)", line, err)
				}
				dir := *u
				dir.Path, dir.RawPath = path.Dir(u.Path), ""
				d, err := destination.Open(t.Context(), dir.String(), "")
				if err != nil {
					t.Fatalf("open the directory of %q: %v", line, err)
				}
				defer d.Close()
				rc, err := d.Get(t.Context(), path.Base(u.Path))
				if err != nil {
					t.Fatalf("the URL %q names no object: %v", line, err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || len(b) < 8 || string(b[:4]) != "PAR1" {
					t.Fatalf("the URL %q names no Parquet file (%d bytes, %v)", line, len(b), err)
				}
			}
		})
	}
}
