// Command memhelper runs one dedupe and prints its result as JSON, so that
// tests and the benchmark measure the peak RSS of a process that does
// nothing else (the test binary itself carries DuckDB).
//
//	memhelper DEST_URL MODEL MEMORY_LIMIT_BYTES [TARGET_FILE_BYTES]
//
// A limit of +N is N bytes over the least limit this process can keep
// (dedupe.LeastMemoryLimit), measured here: the tightest budget whatever
// the binary's resident pages.
//
// MEMHELPER_DEBUG=1 logs the dedupe's memory budget and steps to stderr;
// MEMHELPER_CPUPROFILE and MEMHELPER_TRACE name files for a CPU profile
// and an execution trace.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/dedupe"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/memstat"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memhelper:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 4 {
		return fmt.Errorf("usage: memhelper DEST_URL MODEL MEMORY_LIMIT_BYTES [TARGET_FILE_BYTES]")
	}
	over, tightest := strings.CutPrefix(os.Args[3], "+")
	limit, err := strconv.ParseInt(over, 10, 64)
	if err != nil {
		return err
	}
	if tightest {
		limit += dedupe.LeastMemoryLimit()
	}
	var target int64
	if len(os.Args) > 4 {
		if target, err = strconv.ParseInt(os.Args[4], 10, 64); err != nil {
			return err
		}
	}
	if p := os.Getenv("MEMHELPER_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("MEMHELPER_TRACE"); p != "" {
		// An execution trace, to see which stages leave a core idle.
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		trace.Start(f)
		defer trace.Stop()
	}
	if at := os.Getenv("MEMHELPER_HEAPAT"); at != "" {
		// A heap profile in the middle of the run, to see the live set.
		d, err := time.ParseDuration(at)
		if err != nil {
			return err
		}
		go func() {
			time.Sleep(d)
			if f, err := os.Create(os.Getenv("MEMHELPER_HEAPPROFILE") + ".mid"); err == nil {
				pprof.WriteHeapProfile(f)
				f.Close()
			}
		}()
	}
	ctx := context.Background()
	d, err := destination.Open(ctx, os.Args[1], "")
	if err != nil {
		return err
	}
	defer d.Close()
	opts := dedupe.Options{Model: os.Args[2], MemoryLimit: limit, TargetFileBytes: target}
	if os.Getenv("MEMHELPER_DEBUG") != "" {
		// The memory budget and the run's steps, to see where a peak came from.
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	res, err := dedupe.Run(ctx, d, d.ObjectURL, opts)
	if err != nil {
		return err
	}
	if p := os.Getenv("MEMHELPER_HEAPPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	peak, err := memstat.PeakRSS()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(Output{Result: res, Limit: limit, PeakRSS: peak})
}

// Output is what the helper prints.
type Output struct {
	Result *dedupe.Result
	// Limit is the memory limit the dedupe ran under.
	Limit int64
	// PeakRSS is VmHWM: the parent's rusage Maxrss of a child counts the
	// parent's own RSS too, since Go starts children with CLONE_VM and the
	// kernel keeps the high-water mark of the memory the child shared
	// before exec.
	PeakRSS int64
}
