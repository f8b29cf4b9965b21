package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestVacuumDryRunListsIcebergMetadata: on a model published as Iceberg
// whose snapshots a vacuum expires, the dry run lists, in its JSON, exactly
// the objects that the real vacuum then removes from the store (data
// files, run metadata, and the view's old metadata versions, manifest
// lists and manifests), and deletes nothing; the real vacuum's JSON lists
// the same.
func TestVacuumDryRunListsIcebergMetadata(t *testing.T) {
	db, dest := setupItems(t)
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", dest, "--table-format", "iceberg"}
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := highwater(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, errOut)
		}
		return out
	}
	update := func(i int) {
		pgtest.Exec(t, db, fmt.Sprintf(`UPDATE items SET name = name || '+', updated_at = now() WHERE id <= %d`, 10*(i+1)))
		run(args...)
	}
	run(args...)
	for i := range 3 {
		update(i)
	}
	run("dedupe", "--dest", dest, "--model", "items") // removes the exports' files
	vacuum := []string{"vacuum", "--dest", dest, "--model", "items", "--older-than", "1ms", "--json"}
	// A first vacuum expires every snapshot but the current one, which
	// every version since names, so they and their manifests stay; after
	// one more commit and a dedupe, the next vacuum drops them.
	time.Sleep(10 * time.Millisecond)
	run(vacuum...)
	update(3)
	run("dedupe", "--dest", dest, "--model", "items")
	time.Sleep(10 * time.Millisecond)

	root := strings.TrimPrefix(dest, "file://")
	before := listStore(t, root)
	var dry, real vacuumJSON
	if err := json.Unmarshal([]byte(run(append(vacuum, "--dry-run")...)), &dry); err != nil {
		t.Fatal(err)
	}
	if got := listStore(t, root); !maps.Equal(got, before) {
		t.Fatalf("the dry run changed the store: %d objects before, %d after", len(before), len(got))
	}
	if err := json.Unmarshal([]byte(run(vacuum...)), &real); err != nil {
		t.Fatal(err)
	}
	after := listStore(t, root)

	var removed []string
	for k := range before {
		if !after[k] {
			removed = append(removed, k)
		}
	}
	slices.Sort(removed)
	listed := func(j vacuumJSON) []string {
		var keys []string
		for _, u := range slices.Concat(j.Deleted, j.Pruned, j.IcebergMetadata) {
			keys = append(keys, strings.TrimPrefix(u, dest+"/"))
		}
		slices.Sort(keys)
		return keys
	}
	if !slices.ContainsFunc(removed, func(k string) bool { return strings.HasSuffix(k, ".metadata.json") }) ||
		!slices.ContainsFunc(removed, func(k string) bool { return strings.HasSuffix(k, ".avro") }) || len(dry.Deleted) == 0 {
		t.Fatalf("the vacuum removed no data file, metadata version or Avro file: the test tests nothing: %v", removed)
	}
	if got := listed(dry); !slices.Equal(got, removed) {
		t.Errorf("the dry run lists %d objects, the vacuum removed %d:\nlisted  %v\nremoved %v", len(got), len(removed), got, removed)
	}
	if got := listed(real); !slices.Equal(got, removed) {
		t.Errorf("the vacuum lists %d objects, and removed %d:\nlisted  %v\nremoved %v", len(got), len(removed), got, removed)
	}
}

// listStore is the set of objects under root, by their key.
func listStore(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = true
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
