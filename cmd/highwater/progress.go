package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/highwater-dev/highwater/internal/progress"
)

// The progress line is written by hand rather than with a progress-bar
// library: it is one line of counts redrawn with \r, and the part that
// takes care, sharing the terminal with the log lines, is no library's.

// frameInterval keeps redraws to about four a second.
const frameInterval = 250 * time.Millisecond

// terminal is stderr when it is a terminal. The progress line and the log
// lines share it: a log line first clears the progress line, which the
// next frame draws again below it.
type terminal struct {
	mu    sync.Mutex
	f     *os.File
	shown bool
}

const clearLine = "\r\x1b[K"

func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shown {
		io.WriteString(t.f, clearLine)
		t.shown = false
	}
	return t.f.Write(p)
}

func (t *terminal) draw(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.f, clearLine+line)
	t.shown = true
}

func (t *terminal) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shown {
		io.WriteString(t.f, clearLine)
		t.shown = false
	}
}

// progressKind names what a command counts.
type progressKind struct {
	unit  string // rows, objects
	verb  string // written, deleted
	files bool   // count files apart from the units
}

var (
	countRows    = progressKind{unit: "rows", verb: "written", files: true}
	countObjects = progressKind{unit: "objects", verb: "deleted"}
)

// showProgress starts a progress line for label on a terminal stderr and
// returns its counter and the function that ends it (drawing the last
// frame, then clearing it). Off a terminal the counter is nil: the run
// counts nothing and nothing is printed.
func (e *environment) showProgress(label string, kind progressKind) (*progress.Counter, func()) {
	t, ok := e.stderr.(*terminal)
	if !ok {
		return nil, func() {}
	}
	c := progress.New()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(frameInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t.draw(frame(label, kind, c.Snapshot()))
			case <-stop:
				t.draw(frame(label, kind, c.Snapshot()))
				t.clear()
				return
			}
		}
	}()
	var once sync.Once
	return c, func() { once.Do(func() { close(stop); <-done }) }
}

// frame is one progress line: "orders: 12.3k rows, 4.1k rows/s, 2 files,
// 45 MiB written, 37%, ETA 12s".
func frame(label string, kind progressKind, s progress.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s, %s %s/s", label, count(s.Done), kind.unit, count(int64(s.Rate())), kind.unit)
	if kind.files {
		fmt.Fprintf(&b, ", %d files", s.Files)
	}
	fmt.Fprintf(&b, ", %s %s", humanize.IBytes(uint64(s.Bytes)), kind.verb)
	if f, ok := s.Fraction(); ok {
		// Rounded down: 100% only once the estimate is reached.
		fmt.Fprintf(&b, ", %d%%", int(100*f))
		if eta, ok := s.ETA(); ok && eta >= time.Second {
			fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
		}
	}
	return b.String()
}

func count(n int64) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return strings.ReplaceAll(humanize.SIWithDigits(float64(n), 1, ""), " ", "")
}
