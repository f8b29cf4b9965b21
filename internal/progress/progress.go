// Package progress counts the work of a long run (an export, a dedupe, a
// vacuum) for a display that polls it. The run only adds to a Counter; it
// never waits on the display, and a nil *Counter counts nothing, so a run
// reports its progress with one call and no check.
package progress

import (
	"sync/atomic"
	"time"
)

// Counter is safe for concurrent use by the run's goroutines.
type Counter struct {
	start       time.Time
	done, total atomic.Int64
	files       atomic.Int64
	bytes       atomic.Int64
}

// New starts a counter at now.
func New() *Counter { return &Counter{start: time.Now()} }

// Add counts n more units done (rows for an export or dedupe, objects for
// a vacuum).
func (c *Counter) Add(n int64) {
	if c != nil {
		c.done.Add(n)
	}
}

// AddTotal raises the estimate of the units the run will do; a run that
// learns its work in phases adds each phase's share when it starts.
func (c *Counter) AddTotal(n int64) {
	if c != nil && n > 0 {
		c.total.Add(n)
	}
}

// AddFile counts a file written (or deleted) of the given size.
func (c *Counter) AddFile(bytes int64) {
	if c != nil {
		c.files.Add(1)
		c.bytes.Add(bytes)
	}
}

// Snapshot is the state of a Counter at one moment.
type Snapshot struct {
	Done, Total  int64 // Total is 0 when there is no estimate
	Files, Bytes int64
	Elapsed      time.Duration
}

// Snapshot reads the counter.
func (c *Counter) Snapshot() Snapshot {
	if c == nil {
		return Snapshot{}
	}
	return Snapshot{Done: c.done.Load(), Total: c.total.Load(), Files: c.files.Load(), Bytes: c.bytes.Load(),
		Elapsed: time.Since(c.start)}
}

// Rate is the units done per second so far.
func (s Snapshot) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Done) / s.Elapsed.Seconds()
}

// Fraction is the share of the estimate done, and whether it means
// anything: there is an estimate and the run has not yet passed it (an
// estimate that was too low says nothing about what is left).
func (s Snapshot) Fraction() (float64, bool) {
	if s.Total <= 0 || s.Done > s.Total {
		return 0, false
	}
	return float64(s.Done) / float64(s.Total), true
}

// ETA is the time left at the rate so far, when there is an estimate and
// a rate.
func (s Snapshot) ETA() (time.Duration, bool) {
	r := s.Rate()
	if _, ok := s.Fraction(); !ok || r <= 0 {
		return 0, false
	}
	return time.Duration(float64(s.Total-s.Done) / r * float64(time.Second)), true
}
