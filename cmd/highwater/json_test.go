package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgtest"
)

// TestJSONShapes fixes the --json shape of every command in golden files
// under testdata/json (go test -run TestJSONShapes -update rewrites them).
// What changes from run to run (times, ids, sizes, the lake's path) is
// replaced by placeholders; everything else, field names and order
// included, must match.
func TestJSONShapes(t *testing.T) {
	db, dest := setupItems(t)
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest, "--json"}
	steps := []struct {
		golden string
		args   []string
		code   int
	}{
		{"export-first", export, 0},
		{"export-next", export, 0},
		{"dedupe", []string{"dedupe", "--dest", dest, "--model", "items", "--json"}, 0},
		{"dedupe-nothing", []string{"dedupe", "--dest", dest, "--model", "items", "--json"}, 0},
		{"vacuum-dry-run", []string{"vacuum", "--dest", dest, "--model", "items", "--older-than", "1ns", "--dry-run", "--json"}, 0},
		{"vacuum", []string{"vacuum", "--dest", dest, "--model", "items", "--older-than", "1ns", "--json"}, 0},
		{"verify", []string{"verify", "--dest", dest, "--model", "items", "--json"}, 0},
		{"status", []string{"status", "--dest", dest, "--json"}, 0},
		{"export-error", append(export[:len(export):len(export)], "--model", "items2", "--table", "public.nope"), 1},
	}
	for _, s := range steps {
		if s.golden == "export-next" {
			pgtest.Exec(t, db, `UPDATE items SET name = 'changed', updated_at = now() WHERE id <= 5`)
		}
		code, out, errOut := highwater(t, s.args...)
		if code != s.code {
			t.Fatalf("%s: exit %d, want %d\n%s", s.golden, code, s.code, errOut)
		}
		if !strings.HasSuffix(out, "\n") {
			t.Fatalf("%s printed no line: %q", s.golden, out)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !json.Valid([]byte(l)) {
				t.Fatalf("%s printed a line that is not JSON: %q", s.golden, l)
			}
		}
		got := normalizeJSON(out, strings.TrimPrefix(dest, "file://"))
		checkGolden(t, filepath.Join("testdata", "json", s.golden+".golden"), got)
	}
}

var (
	// Fields whose values differ between runs.
	volatileField = regexp.MustCompile(`"(committed|run_id|duration_seconds|from|to|watermark|bytes|input_bytes|output_bytes|checked)":("(?:[^"\\]|\\.)*"|[-0-9.e+]+)`)
	runID         = regexp.MustCompile(`\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{8}`)
	hexID         = regexp.MustCompile(`\b[0-9a-f]{12,64}\b`)
)

func normalizeJSON(out, lakeDir string) string {
	out = strings.ReplaceAll(out, lakeDir, "/LAKE")
	// A placeholder keeps the value's JSON type: "<x>" for a string, <x>
	// for a number.
	out = volatileField.ReplaceAllStringFunc(out, func(m string) string {
		sub := volatileField.FindStringSubmatch(m)
		if strings.HasPrefix(sub[2], `"`) {
			return `"` + sub[1] + `":"<` + sub[1] + `>"`
		}
		return `"` + sub[1] + `":<` + sub[1] + `>`
	})
	out = runID.ReplaceAllString(out, "<run>")
	return hexID.ReplaceAllString(out, "<id>")
}
