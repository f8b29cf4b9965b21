package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestVacuumPrintsEscapedURLs: the objects vacuum deletes come from
// listing the store, so their keys hold whatever was put there, a space,
// a newline, '%' or a terminal's escape sequence among them. Vacuum prints
// each as files does, one escaped URL that names exactly that object, and
// the runs it declares abandoned escaped the same way, in text and in
// JSON; nothing it prints holds a control character.
func TestVacuumPrintsEscapedURLs(t *testing.T) {
	db, dest := setupItems(t)
	const model = "ord ers%"
	export := []string{"export", "--source", db, "--table", "public.items", "--model", model, "--primary-key", "id",
		"--modified-at", "updated_at", "--dest", dest}
	for range 2 {
		if code, _, errOut := highwater(t, export...); code != 0 {
			t.Fatalf("export: %s", errOut)
		}
	}
	root := filepath.Join(strings.TrimPrefix(dest, "file://"), model)
	runs := runDirs(t, dest, model)
	const odd = "a b\nc\x1b[2J%41\t"
	// A stray attempt of the first (committed) run, declared abandoned
	// and deleted, and an object in that run's metadata, pruned.
	stray := "data/" + runs[0] + "/" + odd + "/part-000001.parquet"
	meta := "_runs/" + runs[0] + "/" + odd + ".json"
	for _, k := range []string{stray, meta} {
		p := filepath.Join(root, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the commits are then older than the retention
	want := []string{root + "/" + stray, root + "/" + meta}
	vacuum := []string{"vacuum", "--dest", dest, "--model", model, "--older-than", "5ms"}

	// paths checks that each printed URL is one escaped URL, and returns
	// the paths they name.
	paths := func(urls []string) []string {
		t.Helper()
		var out []string
		for _, s := range urls {
			u, err := url.Parse(s)
			if err != nil || u.String() != s || u.Scheme != "file" || u.RawQuery != "" || u.Fragment != "" {
				t.Fatalf("vacuum printed %q, which is not one escaped URL (%v)", s, err)
			}
			out = append(out, u.Path)
		}
		return out
	}
	check := func(args []string, verb string) {
		t.Helper()
		code, out, errOut := highwater(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if i := strings.IndexFunc(out, func(r rune) bool { return r < ' ' && r != '\n' || r == 0x7f }); i >= 0 {
			t.Fatalf("%v printed a control character:\n%q", args, out)
		}
		var urls, declared []string
		for line := range strings.Lines(out) {
			line = strings.TrimSuffix(line, "\n")
			if u, ok := strings.CutPrefix(line, verb+" "); ok {
				urls = append(urls, u)
			}
			if id, ok := strings.CutPrefix(line, "would declare abandoned: "); ok {
				declared = append(declared, id)
			}
		}
		got := paths(urls)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Fatalf("%v does not name %q among\n%q", args, w, got)
			}
		}
		if verb == "would delete" {
			id, err := url.PathUnescape(strings.Join(declared, ""))
			if err != nil || id != runs[0]+"/"+odd {
				t.Fatalf("%v declares %q abandoned (%v), want the stray attempt", args, declared, err)
			}
		}
	}
	check(append(slices.Clone(vacuum), "--dry-run"), "would delete")

	code, out, errOut := highwater(t, append(slices.Clone(vacuum), "--dry-run", "--json")...)
	var j struct {
		Deleted, Pruned []string
	}
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
		t.Fatalf("vacuum --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if got := paths(append(j.Deleted, j.Pruned...)); !slices.Contains(got, want[0]) || !slices.Contains(got, want[1]) {
		t.Fatalf("vacuum --json does not name %q among\n%q", want, got)
	}

	check(vacuum, "deleted")
	for _, w := range want {
		if _, err := os.Stat(w); !os.IsNotExist(err) {
			t.Fatalf("%q is still there after vacuum (%v)", w, err)
		}
	}
}
