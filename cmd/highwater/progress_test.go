package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/internal/progress"
)

// buildBinary builds the real highwater: progress depends on what stderr
// is, which only a separate process shows.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "highwater")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build highwater: %v\n%s", err, out)
	}
	return bin
}

// runOnTerminal runs bin with stderr on a pseudo-terminal and returns what
// the terminal received.
func runOnTerminal(t *testing.T, bin string, args ...string) (code int, stdout, term string) {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	defer ptm.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var got bytes.Buffer
	copied := make(chan struct{})
	go func() {
		// The master reads EIO once the child has closed its side.
		io.Copy(&got, ptm)
		close(copied)
	}()
	err = cmd.Wait()
	<-copied
	return exitOf(t, err), out.String(), got.String()
}

func runOnPipe(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	return exitOf(t, cmd.Run()), out.String(), errb.String()
}

func exitOf(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// TestProgressOnlyOnATerminal runs export, dedupe and vacuum with stderr
// on a pseudo-terminal, where each draws its progress line and clears it,
// and on a pipe, where nothing of it is printed and every log line is JSON.
func TestProgressOnlyOnATerminal(t *testing.T) {
	bin := buildBinary(t)
	db, _ := setupItems(t)
	pgtest.Exec(t, db, `ANALYZE items`)
	commands := func(dest string) [][]string {
		return [][]string{
			{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
				"--dest", dest, "--page-rows", "50"},
			{"dedupe", "--dest", dest, "--model", "items"},
			{"vacuum", "--dest", dest, "--model", "items", "--older-than", "1ns"},
		}
	}
	want := []string{"items: 500 rows, ", "items: 500 rows, ", "items: 1 objects, "}
	for i, args := range commands("file://" + t.TempDir()) {
		code, out, term := runOnTerminal(t, bin, args...)
		if code != 0 {
			t.Fatalf("%s on a terminal: exit %d\n%s", args[0], code, term)
		}
		frame := lastFrame(term)
		if !strings.Contains(term, clearLine+want[i]) || !strings.Contains(frame, "/s") {
			t.Errorf("%s on a terminal drew no progress line %q...; the terminal got:\n%q", args[0], want[i], term)
		}
		if !strings.HasSuffix(term, clearLine) {
			t.Errorf("%s left its progress line on the terminal: %q", args[0], term)
		}
		if strings.Contains(out, "\r") {
			t.Errorf("%s drew progress on stdout: %q", args[0], out)
		}
		t.Logf("%s: last frame %q", args[0], frame)
	}
	for _, args := range commands("file://" + t.TempDir()) {
		code, _, errOut := runOnPipe(t, bin, args...)
		if code != 0 {
			t.Fatalf("%s on a pipe: exit %d\n%s", args[0], code, errOut)
		}
		if strings.ContainsAny(errOut, "\r\x1b") || strings.Contains(errOut, "/s") {
			t.Errorf("%s printed progress off a terminal:\n%q", args[0], errOut)
		}
		for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
			if l != "" && !strings.HasPrefix(l, "{") {
				t.Errorf("%s logged a line that is not JSON off a terminal: %q", args[0], l)
			}
		}
	}
}

// lastFrame is the last progress line drawn on term.
func lastFrame(term string) string {
	parts := strings.Split(strings.TrimSuffix(term, clearLine), clearLine)
	return parts[len(parts)-1]
}

func TestProgressFrame(t *testing.T) {
	cases := []struct {
		s    progress.Snapshot
		kind progressKind
		want string
	}{
		{progress.Snapshot{Done: 2500, Total: 10000, Files: 2, Bytes: 3 << 20, Elapsed: 5 * time.Second}, countRows,
			"m: 2.5k rows, 500 rows/s, 2 files, 3.0 MiB written, 25%, ETA 15s"},
		{progress.Snapshot{Done: 12000, Total: 10000, Elapsed: 2 * time.Second}, countRows,
			"m: 12k rows, 6k rows/s, 0 files, 0 B written"}, // past a wrong estimate: no percentage
		{progress.Snapshot{Done: 7, Elapsed: time.Second}, countRows, "m: 7 rows, 7 rows/s, 0 files, 0 B written"},
		{progress.Snapshot{Done: 999, Total: 1000, Elapsed: time.Second}, countRows, "m: 999 rows, 999 rows/s, 0 files, 0 B written, 99%"},
		{progress.Snapshot{Done: 3, Total: 4, Files: 3, Bytes: 1024, Elapsed: 3 * time.Second}, countObjects,
			"m: 3 objects, 1 objects/s, 1.0 KiB deleted, 75%, ETA 1s"},
	}
	for _, tc := range cases {
		if got := frame("m", tc.kind, tc.s); got != tc.want {
			t.Errorf("frame(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
