package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadOnlyCommandsCreateNothing runs every command that only reads a
// lake against a file destination that does not exist: each must fail
// (there is no model), and neither the destination's directory nor its
// parent may appear.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	parent := filepath.Join(dir, "absent")
	dest := "file://" + parent + "/lake"
	cases := [][]string{
		{"status", "--dest", dest},
		{"status", "--dest", dest, "--model", "orders", "--json"},
		{"status", "--dest", dest + "/{tenant}", "--tenant", "acme corp"},
		{"files", "--dest", dest, "--model", "orders"},
		{"verify", "--dest", dest, "--model", "orders"},
		{"verify", "--dest", dest, "--model", "orders", "--json"},
		{"ddl", "--dest", dest, "--model", "orders", "--engine", "athena"},
		{"ddl", "--dest", dest, "--model", "orders", "--engine", "spark"},
		{"ddl", "--dest", dest, "--model", "orders", "--engine", "duckdb"},
		{"vacuum", "--dest", dest, "--model", "orders", "--older-than", "1h", "--dry-run"},
	}
	for _, args := range cases {
		code, _, errOut := highwater(t, args...)
		if code == exitOK {
			t.Errorf("%q: exit 0 on a destination that does not exist", args)
		}
		if _, err := os.Stat(parent); !os.IsNotExist(err) {
			t.Fatalf("%q (exit %d: %s) created %s", args, code, errOut, parent)
		}
	}
}
