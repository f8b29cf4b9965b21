package memstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestPeakRSSOf(t *testing.T) {
	self, err := PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	// A high-water mark only rises: read by pid after it, it is no lower.
	byPID, err := PeakRSSOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self <= 0 || byPID < self {
		t.Errorf("PeakRSS %d, then PeakRSSOf(own pid) %d: want a positive figure that does not fall", self, byPID)
	}
}

func TestPeakRSSOfGone(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// Reaped: its /proc entry is gone (pids are not reused this soon).
	if v, err := PeakRSSOf(cmd.Process.Pid); err == nil {
		t.Errorf("PeakRSSOf(reaped pid %d) = %d, want an error", cmd.Process.Pid, v)
	}
}

func TestSample(t *testing.T) {
	// The test binary itself, doing nothing for a while, as the child.
	cmd := exec.Command(os.Args[0], "-test.run=^TestSampleChild$")
	cmd.Env = append(os.Environ(), "MEMSTAT_CHILD=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := Sample(cmd.Process.Pid, time.Millisecond)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if peak := stop(); peak <= 0 {
		t.Errorf("Sample of a running child = %d, want its peak RSS", peak)
	}
}

func TestSampleChild(t *testing.T) {
	if os.Getenv("MEMSTAT_CHILD") == "" {
		t.Skip("the child of TestSample")
	}
	time.Sleep(200 * time.Millisecond)
}
