package file

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing the n bytes at off of f to disk, without
// waiting for them.
func startWriteback(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
