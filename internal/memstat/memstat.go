// Package memstat reads the process's memory figures from /proc.
package memstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// PeakRSS returns VmHWM, the high-water mark of the process's resident
// memory.
func PeakRSS() (int64, error) {
	return peakRSS("self")
}

// PeakRSSOf returns VmHWM of the process pid: of its own address space,
// unlike the rusage Maxrss of a child, which also counts the parent's
// before exec.
func PeakRSSOf(pid int) (int64, error) {
	return peakRSS(strconv.Itoa(pid))
}

func peakRSS(proc string) (int64, error) {
	path := "/proc/" + proc + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read peak RSS: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read peak RSS: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read peak RSS: no VmHWM in %s", path)
}

// Sample reads PeakRSSOf(pid) at once and then every interval until stop
// is called; stop returns the highest value read, 0 if none could be. What
// the process reaches in its last interval is not seen: the figure is a
// lower bound.
func Sample(pid int, every time.Duration) (stop func() int64) {
	var peak int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if v, err := PeakRSSOf(pid); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-finished
		return peak
	}
}
