package memstat

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDropFilePages(t *testing.T) {
	before, err := ReadResident()
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := DropFilePages()
	if err != nil {
		t.Fatal(err)
	}
	after, err := ReadResident()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's code in use comes back at once, but not all of
	// what it had resident.
	if dropped <= 0 || after.File >= before.File {
		t.Errorf("file pages %d bytes, %d after dropping %d: want fewer", before.File, after.File, dropped)
	}
}

// TestDropFilePagesKeepsCopies maps a file privately, writes to the
// mapping and makes it read-only, as the dynamic loader does with the
// relocations of a position-independent binary: the written pages must
// not fall back to the file's bytes.
func TestDropFilePagesKeepsCopies(t *testing.T) {
	const size = 64 << 10
	path := filepath.Join(t.TempDir(), "mapped")
	file := bytes.Repeat([]byte{'f'}, size)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	copied, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(copied)
	read, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(read)
	copy(copied[:size/2], bytes.Repeat([]byte{'c'}, size/2))
	if err := unix.Mprotect(copied, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(bytes.Repeat([]byte{'c'}, size/2), file[size/2:])
	if !bytes.Equal(read, file) { // resident before the drop
		t.Fatal("the read-only mapping does not hold the file")
	}
	if _, err := DropFilePages(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(copied, want) {
		t.Errorf("a read-only mapping's private copies were dropped: %d of %d bytes are the file's again", bytes.Count(copied[:size/2], []byte{'f'}), size/2)
	}
	if !bytes.Equal(read, file) {
		t.Error("a dropped mapping does not read its file back")
	}
}
