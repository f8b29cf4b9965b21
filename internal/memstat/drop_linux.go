package memstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// DropFilePages takes the pages of the process's read-only file mappings,
// mostly the binary's code and read-only data, out of its resident
// memory, and returns how many bytes of them were resident. The kernel
// keeps them in its page cache: a page used again comes back with a minor
// fault, so that only the pages in use return. A mapping holding private
// copies of pages (Anonymous in smaps: relocations written before the
// mapping was made read-only, a debugger's breakpoints) is left alone:
// dropping would put the file's bytes back in place of the copies. So is
// one with pages in swap (Swap in smaps), which are private copies too,
// only not resident: Anonymous does not count them.
func DropFilePages() (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("drop file pages: %w", err)
	}
	defer f.Close()
	var dropped int64
	// The mapping whose fields are being read, if it is a candidate.
	var start, end uintptr
	var candidate bool
	var rss, anon, swap int64
	drop := func() {
		if !candidate || rss == 0 || anon != 0 || swap != 0 {
			return
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_DONTNEED); errno == 0 {
			dropped += rss
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) == 0 {
			continue
		}
		if name, ok := bytes.CutSuffix(fields[0], []byte(":")); ok {
			var dst *int64
			switch string(name) {
			case "Rss":
				dst = &rss
			case "Anonymous":
				dst = &anon
			case "Swap":
				dst = &swap
			default:
				continue
			}
			if len(fields) < 2 {
				return dropped, fmt.Errorf("drop file pages: no value of %s", name)
			}
			kb, err := strconv.ParseInt(string(fields[1]), 10, 64)
			if err != nil {
				return dropped, fmt.Errorf("drop file pages: %s: %w", name, err)
			}
			*dst = kb << 10
			continue
		}
		// A mapping: address range, permissions, offset, device, inode
		// and, for a file, its name.
		drop()
		candidate, rss, anon, swap = false, 0, 0, 0
		lo, hi, ok := bytes.Cut(fields[0], []byte("-"))
		if !ok || len(fields) < 6 || len(fields[1]) < 2 || fields[1][1] == 'w' || string(fields[4]) == "0" {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || b <= a {
			return dropped, fmt.Errorf("drop file pages: a mapping %q", fields[0])
		}
		start, end, candidate = uintptr(a), uintptr(b), true
	}
	drop()
	if err := sc.Err(); err != nil {
		return dropped, fmt.Errorf("drop file pages: %w", err)
	}
	return dropped, nil
}
