package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestHelp checks every command's help: on stdout with --help and with
// `highwater help CMD`, with a summary, examples, the exit status, flags
// printed with two dashes and defaults that read as values.
func TestHelp(t *testing.T) {
	root := newRoot(&environment{getenv: os.Getenv})
	var cmds [][]string
	for _, c := range root.Commands() {
		if c.Name() == "completion" || c.Name() == "help" {
			continue
		}
		cmds = append(cmds, []string{c.Name()})
		for _, sub := range c.Commands() {
			cmds = append(cmds, []string{c.Name(), sub.Name()})
		}
	}
	if len(cmds) < 9 {
		t.Fatalf("only %d commands: %v", len(cmds), cmds)
	}
	singleDash := regexp.MustCompile(`(^|[\s\[(])-[a-z][a-z-]+`)
	for _, path := range cmds {
		for _, args := range [][]string{append(path[:len(path):len(path)], "--help"), append([]string{"help"}, path...)} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errOut := highwater(t, args...)
				if code != 0 || errOut != "" {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				c, _, _ := root.Find(path)
				first, _, _ := strings.Cut(c.Long, "\n")
				for _, want := range []string{first, "Examples:\n", "  highwater " + strings.Join(path, " "), "Exit status:", "  130  interrupted", "Flags:\n", "--help"} {
					if !strings.Contains(out, want) {
						t.Errorf("help does not contain %q:\n%s", want, out)
					}
				}
				if m := singleDash.FindString(out); m != "" {
					t.Errorf("help prints a flag with one dash: %q", m)
				}
				if strings.Contains(out, "(default -") || strings.Contains(out, "ns)") {
					t.Errorf("help prints a default that is not a value:\n%s", out)
				}
			})
		}
	}
	_, out, _ := highwater(t, "--help")
	for _, c := range root.Commands() {
		if !strings.Contains(out, c.Short) {
			t.Errorf("highwater --help does not list %s with %q", c.Name(), c.Short)
		}
	}
	_, out, _ = highwater(t, "export", "--help")
	if !regexp.MustCompile(`--lookback duration +re-read .*\(default 30s\)`).MatchString(out) {
		t.Errorf("export --help does not show --lookback's default of 30s:\n%s", out)
	}
}

// TestSuggestions checks that a mistyped command or flag exits 2 with one
// line naming the nearest.
func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exprot"}, `unknown command "exprot" for "highwater"; did you mean export?`},
		{[]string{"stauts", "--dest", "file:///x"}, "did you mean status?"},
		{[]string{"export", "--dset", "file:///x"}, "unknown flag: --dset (did you mean --dest?)"},
		{[]string{"status", "--jsn"}, "unknown flag: --jsn (did you mean --json?)"},
		{[]string{"dedupe", "--memory-limt", "1GiB"}, "(did you mean --memory-limit?)"},
		{[]string{"export", "--log-levl", "debug"}, "(did you mean --log-level?)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := highwater(t, tc.args...)
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", code, out, errOut, tc.want)
			}
		})
	}
	if code, _, errOut := highwater(t, "export", "--frobnicate"); code != 2 || strings.Contains(errOut, "did you mean") {
		t.Fatalf("a flag near nothing: exit %d, %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	want := "highwater " + buildInfo().String() + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errOut := highwater(t, args...)
		if code != 0 || out != want || errOut != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want %q", args, code, out, errOut, want)
		}
	}
	b := build{version: "v1.2.3", revision: "0123456789abcdef0123", modified: true}
	if got := b.String(); got != "v1.2.3 (revision 0123456789abcdef0123+modified)" {
		t.Fatalf("String: %q", got)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := highwater(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "highwater") || errOut != "" {
			t.Fatalf("completion %s: exit %d, %d bytes, stderr %q", shell, code, len(out), errOut)
		}
	}
}

// TestCreatedByNamesTheBuild checks that the footer of every file names
// the version and revision of the binary that wrote it.
func TestCreatedByNamesTheBuild(t *testing.T) {
	db, dest := setupItems(t)
	var out, errb bytes.Buffer
	env := &environment{stdout: &out, stderr: &errb, getenv: os.Getenv,
		build: build{version: "v9.8.7", revision: "0123456789abcdef0123"}}
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	if code := execute(context.Background(), env, args); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errb.String())
	}
	checkCreatedBy(t, dest, "highwater version v9.8.7 (build 0123456789ab)")
	if code := execute(context.Background(), env, []string{"dedupe", "--dest", dest, "--model", "items"}); code != 0 {
		t.Fatalf("dedupe: exit %d: %s", code, errb.String())
	}
	checkCreatedBy(t, dest, "highwater version v9.8.7 (build 0123456789ab)")
}

func checkCreatedBy(t *testing.T, dest, want string) {
	t.Helper()
	_, files, _ := highwater(t, "files", "--dest", dest, "--model", "items")
	for _, u := range strings.Fields(files) {
		f, err := os.Open(strings.TrimPrefix(u, "file://"))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		pf, err := parquet.OpenFile(f, fi.Size())
		if err != nil {
			t.Fatal(err)
		}
		if got := pf.Metadata().CreatedBy; got != want {
			t.Errorf("%s: created_by %q, want %q", u, got, want)
		}
		f.Close()
	}
}
