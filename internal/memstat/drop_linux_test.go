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
	f, file, copied := writtenPrivately(t, size, size/2)
	read, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(read)
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

// TestDropFilePagesKeepsSwappedCopies: private copies that the kernel has
// put in swap are not resident, so smaps counts them under Swap, not
// Anonymous; dropping their mapping would bring back the file's bytes.
func TestDropFilePagesKeepsSwappedCopies(t *testing.T) {
	const size = 64 << 10
	f, _, m := writtenPrivately(t, size, size)
	path := f.Name()
	// MADV_PAGEOUT (Linux 5.4) swaps the copies out, where there is swap.
	if err := unix.Madvise(m, unix.MADV_PAGEOUT); err != nil {
		t.Skipf("page out: %v", err)
	}
	if !swapped(t, path) {
		t.Skip("no page of the mapping went to swap (no swap on this machine?)")
	}
	if _, err := DropFilePages(); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(m, []byte{'f'}); n != 0 {
		t.Errorf("a read-only mapping's swapped copies were dropped: %d of %d bytes are the file's again", n, size)
	}
}

// swapped reports whether a mapping of path has pages in swap.
func swapped(t *testing.T, path string) bool {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range bytes.Split(b, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !bytes.HasSuffix(fields[0], []byte(":")) {
			in = bytes.HasSuffix(line, []byte(path))
			continue
		}
		if in && string(fields[0]) == "Swap:" && len(fields) > 1 && string(fields[1]) != "0" {
			return true
		}
	}
	return false
}

// writtenPrivately writes a file of size bytes 'f', maps it privately,
// writes 'c' over its first written bytes and makes the mapping
// read-only, as the dynamic loader does with the relocations of a
// position-independent binary. It returns the open file, its bytes and
// the mapping, all released when the test ends.
func writtenPrivately(t *testing.T, size, written int) (*os.File, []byte, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mapped")
	file := bytes.Repeat([]byte{'f'}, size)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	copy(m[:written], bytes.Repeat([]byte{'c'}, written))
	if err := unix.Mprotect(m, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	return f, file, m
}
