package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestVerify damages a lake in the ways storage does (a flipped byte, a
// lost object, a lost commit) and checks that verify names each one.
func TestVerify(t *testing.T) {
	db, dest := setupItems(t)
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	if code, _, errOut := highwater(t, args...); code != 0 {
		t.Fatal(errOut)
	}
	pgtest.Exec(t, db, `UPDATE items SET name = 'changed', updated_at = now() WHERE id <= 5`)
	if code, _, errOut := highwater(t, args...); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := highwater(t, "verify", "--dest", dest, "--model", "items")
	if code != 0 || !strings.Contains(out, "items: ok, 2 commits, 2 files") {
		t.Fatalf("verify of a sound lake: exit %d\n%s%s", code, out, errOut)
	}
	_, out, _ = highwater(t, "files", "--dest", dest, "--model", "items")
	files := strings.Fields(out)
	first, second := strings.TrimPrefix(files[0], "file://"), strings.TrimPrefix(files[1], "file://")
	dir := strings.TrimPrefix(dest, "file://")

	// A flipped byte keeps the size: only the hash can tell.
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	os.WriteFile(first, b, 0o644)
	expectProblem(t, dest, "has sha256")

	b[len(b)/2] ^= 0xff
	os.WriteFile(first, b, 0o644)
	os.WriteFile(second, append(mustRead(t, second), 0), 0o644)
	expectProblem(t, dest, "bytes, its commit recorded")

	os.Remove(second)
	expectProblem(t, dest, "is missing")

	os.Remove(filepath.Join(dir, "items", "_manifests", "00000000000000000001.json"))
	expectProblem(t, dest, "the log has a gap: commit 1 is missing")

	code, _, errOut = highwater(t, "verify", "--dest", dest, "--model", "nope")
	if code == 0 || !strings.Contains(errOut, `model "nope" has no commits`) {
		t.Fatalf("verify of an absent model: exit %d: %s", code, errOut)
	}
	if code, _, _ = highwater(t, "verify", "--dest", dest); code != 2 {
		t.Fatalf("verify without --model: exit %d, want 2", code)
	}
}

func expectProblem(t *testing.T, dest, want string) {
	t.Helper()
	code, out, errOut := highwater(t, "verify", "--dest", dest, "--model", "items")
	lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(lines[len(lines)-1], "problems in the committed state of items") {
		t.Fatalf("verify: exit %d, want a problem saying %q\nstdout:\n%sstderr:\n%s", code, want, out, errOut)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
