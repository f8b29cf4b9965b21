package dedupe

import (
	"runtime"
	"runtime/metrics"

	"github.com/highwater-dev/highwater/internal/memstat"
)

// fileResident returns how much of the process's resident memory is
// backed by files, mostly the binary's own pages, which the Go memory
// limit does not count. A binary linking every object-store SDK keeps
// 30-40 MiB of them resident (the kernel maps whole large folios of a
// cached binary), so a limit on the process's RSS must leave room for
// them. ok is false where /proc is not available.
func fileResident() (n int64, ok bool) {
	r, err := memstat.ReadResident()
	if err != nil {
		return 0, false
	}
	return r.File, true
}

// LeastMemoryLimit is the least Options.MemoryLimit that this process can
// keep now: the pages it holds outside the Go runtime (see Run), the slack,
// and the least heap a dedupe works in. A dedupe under a lower limit goes
// on and logs a warning.
func LeastMemoryLimit() int64 {
	files, ok := fileResident()
	if !ok {
		files = fileReserve
	}
	return feasible(files)
}

// heapInUse returns the live heap after a collection: what the process
// keeps whatever the dedupe does.
func heapInUse() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
