// Command memhelper runs one reconcile and prints its result as JSON with
// the process's peak RSS, so that tests and the benchmark measure a
// process that does nothing else (the test binary itself carries more).
//
//	memhelper SOURCE_URL DEST_URL MODEL TABLE MEMORY_LIMIT_BYTES
//
// MEMHELPER_CPUPROFILE=FILE writes a CPU profile of the reconcile there;
// MEMHELPER_DEBUG=1 logs its steps to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/memstat"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/reconcile"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memhelper:", err)
		os.Exit(1)
	}
}

// Output is what the helper prints.
type Output struct {
	Result *reconcile.Result
	// PeakRSS is VmHWM (see dedupe's memhelper for why not Maxrss).
	PeakRSS int64
}

func run() error {
	if len(os.Args) != 6 {
		return fmt.Errorf("usage: memhelper SOURCE_URL DEST_URL MODEL TABLE MEMORY_LIMIT_BYTES")
	}
	limit, err := strconv.ParseInt(os.Args[5], 10, 64)
	if err != nil {
		return err
	}
	if p := os.Getenv("MEMHELPER_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	src, err := pgsource.Connect(ctx, os.Args[1])
	if err != nil {
		return err
	}
	defer src.Close(ctx)
	d, err := destination.Open(ctx, os.Args[2], "")
	if err != nil {
		return err
	}
	defer d.Close()
	opts := reconcile.Options{Model: os.Args[3], MemoryLimit: limit,
		Source: pgsource.Spec{Table: os.Args[4], PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}}
	if os.Getenv("MEMHELPER_DEBUG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	res, err := reconcile.Run(ctx, src, d, d.ObjectURL, opts)
	if err != nil {
		return err
	}
	peak, err := memstat.PeakRSS()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(Output{Result: res, PeakRSS: peak})
}
