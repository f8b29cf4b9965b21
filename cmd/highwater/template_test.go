package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsShowTheTemplateAsWritten runs the error paths that print a
// destination holding a {tenant} placeholder: each must print the URL as
// the user wrote it, never with its braces or other characters encoded
// again (%7Btenant%7D), and touch nothing.
func TestErrorsShowTheTemplateAsWritten(t *testing.T) {
	dir := t.TempDir()
	lake := "file://" + filepath.Join(dir, "lake")
	// A real source, so that the export reaches the destination whatever
	// check finds its error.
	db := pg.NewDatabase(t, `CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, org text)`)
	export := func(dest string, extra ...string) []string {
		args := []string{"export", "--source", db, "--dest", dest, "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}
		if len(extra) > 0 {
			args = append(args, "--tenant-column", "org")
		}
		return append(args, extra...)
	}
	cfgDest := func(dest string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte("source: "+db+"\ndest: "+dest+"\nmodels:\n  - name: items\n    table: items\n    primary_key: id\n    modified_at: updated_at\n    tenant_column: org\n    tenants: [acme]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, dest string
		args       []string
	}{
		{"query placeholder, no tenant", "s3://bucket/lake?prefix={tenant}", nil},
		{"query placeholder", "s3://bucket/lake?prefix={tenant}", []string{"--tenant", "acme"}},
		{"path and query placeholder", lake + "/{tenant}?x={tenant}", []string{"--tenant", "acme"}},
		{"s3 endpoint not http", "s3://bucket/lake/{tenant}?endpoint=ftp://h:1/x", []string{"--tenant", "acme"}},
		{"azure endpoint not http", "azblob://c/lake/{tenant}?endpoint=ftp://h:1/x", []string{"--tenant", "acme"}},
		{"unknown scheme", "ftp://h/{tenant}?a=b", []string{"--tenant", "acme"}},
		{"placeholder in the host", "s3://{tenant}/lake", []string{"--tenant", "acme"}},
		{"dot segments", lake + "/{tenant}/../other", []string{"--tenant", "acme"}},
		{"file URL with a host", "file://host/lake/{tenant}", []string{"--tenant", "acme"}},
		{"no bucket", "s3:///{tenant}?a=b", []string{"--tenant", "acme"}},
	}
	for _, tc := range cases {
		for _, args := range [][]string{
			append([]string{"status", "--dest", tc.dest}, tc.args...),
			append([]string{"files", "--dest", tc.dest, "--model", "items"}, tc.args...),
			append([]string{"verify", "--dest", tc.dest, "--model", "items"}, tc.args...),
			append([]string{"dedupe", "--dest", tc.dest, "--model", "items"}, tc.args...),
			export(tc.dest, tc.args...),
			{"export", "--config", cfgDest(tc.dest)},
			{"status", "--config", cfgDest(tc.dest)},
		} {
			t.Run(tc.name+"/"+args[0]+"/"+args[1], func(t *testing.T) {
				code, _, errOut := highwater(t, args...)
				if code == exitOK {
					t.Fatal("exit 0")
				}
				lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
				last := lines[len(lines)-1]
				if !strings.Contains(last, tc.dest) || strings.Contains(errOut, "%7B") {
					t.Fatalf("the error does not show %q as written:\n%s", tc.dest, errOut)
				}
			})
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "lake")); !os.IsNotExist(err) {
		t.Fatalf("an error path created the lake: %v", err)
	}
}
