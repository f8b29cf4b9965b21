package memstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Resident is the process's resident memory now, split as the kernel
// counts it.
type Resident struct {
	// Anon is anonymous memory: the Go runtime's heap and stacks.
	Anon int64
	// File is memory backed by files (mostly the binary's own pages) and
	// shared memory: what the Go memory limit does not count.
	File int64
}

// ReadResident reads RssAnon, RssFile and RssShmem from
// /proc/self/status; it fails where /proc is not available.
func ReadResident() (Resident, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Resident{}, fmt.Errorf("read resident memory: %w", err)
	}
	var r Resident
	var seen int
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "RssAnon":
			dst = &r.Anon
		case "RssFile", "RssShmem":
			dst = &r.File
		default:
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
		if err != nil {
			return Resident{}, fmt.Errorf("read resident memory: %s: %w", name, err)
		}
		*dst += kb << 10
		seen++
	}
	if seen != 3 {
		return Resident{}, fmt.Errorf("read resident memory: no RssAnon, RssFile and RssShmem in /proc/self/status")
	}
	return r, nil
}
