package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// lakeSnapshot maps every file under dir to the sha256 of its content.
func lakeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		sum := sha256.Sum256(mustRead(t, p))
		snap[strings.TrimPrefix(p, dir)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sameLake(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range after {
		if before[k] != v {
			t.Errorf("%s was written", k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s was deleted", k)
		}
	}
}

// TestLogGapStopsEveryCommand loses a commit from the middle of a real
// lake's log, then puts a stray commit far above its head, and checks that
// every command but verify refuses the model naming the missing seq, that
// none writes anything, and that verify reports the gap.
func TestLogGapStopsEveryCommand(t *testing.T) {
	db, dest := setupItems(t)
	dir := strings.TrimPrefix(dest, "file://")
	manifests := filepath.Join(dir, "items", "_manifests")
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	for i := range 3 {
		pgtest.Exec(t, db, fmt.Sprintf(`UPDATE items SET name = 'v%d', updated_at = now() WHERE id <= 5`, i))
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatal(errOut)
		}
	}
	lake := []string{"--dest", dest, "--model", "items"}
	commands := [][]string{
		export,
		append([]string{"status"}, lake...),
		{"status", "--dest", dest},
		append([]string{"files"}, lake...),
		append([]string{"dedupe"}, lake...),
		append([]string{"ddl", "--engine", "duckdb"}, lake...),
		append([]string{"vacuum", "--older-than", "1ms"}, lake...),
	}
	refuseAll := func(missing int) {
		t.Helper()
		want := fmt.Sprintf("commit %d is missing", missing)
		before := lakeSnapshot(t, dir)
		for _, args := range commands {
			code, out, errOut := highwater(t, args...)
			if code != 1 || !strings.Contains(lastLine(errOut), want) {
				t.Errorf("%s with commit %d lost: exit %d, want 1 and a last line saying %q\nstdout:\n%sstderr:\n%s", args[0], missing, code, want, out, errOut)
			}
		}
		sameLake(t, before, lakeSnapshot(t, dir))
		expectProblem(t, dest, "the log has a gap: "+want)
	}

	second := filepath.Join(manifests, "00000000000000000002.json")
	saved := mustRead(t, second)
	os.Remove(second)
	refuseAll(2)

	os.WriteFile(second, saved, 0o644)
	if code, out, errOut := highwater(t, "verify", "--dest", dest, "--model", "items"); code != 0 {
		t.Fatalf("verify of the restored log: exit %d\n%s%s", code, out, errOut)
	}
	os.WriteFile(filepath.Join(manifests, "00000000000000000099.json"), mustRead(t, filepath.Join(manifests, "00000000000000000003.json")), 0o644)
	refuseAll(4)
}

// TestTamperedCheckpointIsNotTrusted drops a committed file from a real
// lake's state checkpoint and checks that files still lists it, that vacuum
// deletes nothing committed, and that verify reports the checkpoint's
// disagreement with the log.
func TestTamperedCheckpointIsNotTrusted(t *testing.T) {
	db, dest := setupItems(t)
	dir := strings.TrimPrefix(dest, "file://")
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	for i := range 50 {
		pgtest.Exec(t, db, fmt.Sprintf(`UPDATE items SET name = 'v%d', updated_at = now() WHERE id = %d`, i, i+1))
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatal(errOut)
		}
	}
	code, committed, errOut := highwater(t, "files", "--dest", dest, "--model", "items")
	if code != 0 || len(strings.Fields(committed)) != 50 {
		t.Fatalf("files: exit %d, %d files\n%s", code, len(strings.Fields(committed)), errOut)
	}

	ckpt := filepath.Join(dir, "items", "_manifests", "00000000000000000050.checkpoint.json")
	var m map[string]any
	if err := json.Unmarshal(mustRead(t, ckpt), &m); err != nil {
		t.Fatal(err)
	}
	files := m["files"].([]any)
	dropped := files[0].(map[string]any)["key"].(string)
	m["files"] = files[1:]
	b, _ := json.Marshal(m)
	if err := os.WriteFile(ckpt, b, 0o644); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := highwater(t, "files", "--dest", dest, "--model", "items"); code != 0 || out != committed {
		t.Errorf("files after the checkpoint lost %s: exit %d, %d files listed, %d committed\n%s", dropped, code, len(strings.Fields(out)), len(strings.Fields(committed)), errOut)
	}
	if code, out, errOut := highwater(t, "vacuum", "--dest", dest, "--model", "items", "--older-than", "1ms"); code != 0 {
		t.Errorf("vacuum: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range strings.Fields(committed) {
		if _, err := os.Stat(strings.TrimPrefix(f, "file://")); err != nil {
			t.Errorf("vacuum deleted committed file %s: %v", f, err)
		}
	}
	expectProblem(t, dest, "state checkpoint 50 disagrees with the log: it lacks committed file "+dropped)
}
