package main

import (
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestObjectStoresEndToEnd runs export, files, status, verify and dedupe
// against each object store's test server.
func TestObjectStoresEndToEnd(t *testing.T) {
	for _, store := range []struct {
		name   string
		bucket func(testing.TB) string
	}{{"s3", cloudtest.S3}, {"gcs", cloudtest.GCS}, {"azure", cloudtest.Azure}} {
		t.Run(store.name, func(t *testing.T) {
			dest := store.bucket(t) + "/lake/{tenant}"
			db, _ := setupItems(t)
			export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id",
				"--modified-at", "updated_at", "--dest", dest, "--tenant-column", "name", "--tenant", "n7"}
			pgtest.Exec(t, db, `CREATE UNIQUE INDEX ON items (name, id)`)
			if code, _, errOut := highwater(t, export...); code != 0 {
				t.Fatalf("export: %s", errOut)
			}
			pgtest.Exec(t, db, `UPDATE items SET updated_at = now() WHERE name = 'n7'`)
			if code, _, errOut := highwater(t, export...); code != 0 {
				t.Fatalf("second export: %s", errOut)
			}
			code, out, errOut := highwater(t, "files", "--dest", dest, "--tenant", "n7", "--model", "items")
			files := strings.Fields(out)
			if code != 0 || len(files) != 2 {
				t.Fatalf("files: exit %d %q %s", code, out, errOut)
			}
			d, err := destination.Open(t.Context(), dest, "n7")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for _, f := range files {
				key, ok := strings.CutPrefix(f, d.String()+"/")
				if !ok {
					t.Fatalf("file URL %q is not under %s", f, d)
				}
				if a, err := d.Stat(t.Context(), key); err != nil || a.Size == 0 {
					t.Fatalf("stat %s: %v", key, err)
				}
			}
			code, out, _ = highwater(t, "status", "--dest", dest, "--tenant", "n7", "--model", "items")
			if code != 0 || len(strings.Split(strings.TrimSpace(out), "\n")) != 3 {
				t.Fatalf("status: exit %d\n%s", code, out)
			}
			if code, out, errOut := highwater(t, "verify", "--dest", dest, "--tenant", "n7", "--model", "items"); code != 0 {
				t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
			}
			if code, _, errOut := highwater(t, "dedupe", "--dest", dest, "--tenant", "n7", "--model", "items"); code != 0 {
				t.Fatalf("dedupe: %s", errOut)
			}
			if code, out, _ := highwater(t, "files", "--dest", dest, "--tenant", "n7", "--model", "items"); code != 0 || len(strings.Fields(out)) != 1 {
				t.Fatalf("files after dedupe: %q", out)
			}
		})
	}
}
