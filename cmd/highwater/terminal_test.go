package main

import (
	"os"
	"testing"

	"github.com/creack/pty"
)

// TestIsTerminal: a pseudo-terminal is a terminal, and other character
// devices, /dev/null above all, are not.
func TestIsTerminal(t *testing.T) {
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	if !isTerminal(tty) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}
	for _, name := range []string{os.DevNull, "/dev/zero"} {
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if isTerminal(f) {
			t.Errorf("%s is taken for a terminal", name)
		}
		f.Close()
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file is taken for a terminal")
	}
}
