package main

import (
	"runtime"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

// leaveSourceACore runs the export on one core fewer than the runtime's
// default when its one source session is served on this machine, unless
// GOMAXPROCS says otherwise, and returns what undoes it.
//
// The backend that serves a single session is the pipeline's slowest
// stage (the reader finds the socket empty), and on this machine it
// competes with the client for the same cores: with a P for each core,
// the client's reader and writer run at once beside the backend, three
// busy threads on two cores, and every handoff between them parks and
// wakes a thread. One P fewer leaves the backend its core. Measured on 2
// cores, 1M rows, 6 runs each: client CPU 1.48-1.64 s against 1.61-2.05
// s, system time halved, the backend's CPU the same, and the wall time
// shorter (docs/bench.md). Several sessions at once (--parallel) keep
// every core: their backends share the cores anyway, and the client has
// as many readers to feed.
func leaveSourceACore(env *environment, sourceURL string, sessions int) (restore func()) {
	if env.getenv("GOMAXPROCS") != "" || sessions > 1 || !pgsource.OnThisHost(sourceURL) {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	if n := runtime.GOMAXPROCS(0); n > 1 {
		runtime.GOMAXPROCS(n - 1)
	}
	return func() { runtime.GOMAXPROCS(prev) }
}
