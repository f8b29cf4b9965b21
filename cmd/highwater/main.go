// Command highwater copies PostgreSQL tables into data lakes as
// append-only Parquet files, incrementally, with durable manifests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	_ "time/tzdata" // naive timestamps are read in IANA zones, also where the system has no zoneinfo

	"github.com/highwater-dev/highwater/internal/destination"
)

const usage = `highwater copies PostgreSQL tables into data lakes as Parquet, incrementally.

Usage:
  highwater export  --source URL --table SCHEMA.TABLE --primary-key COL[,COL] --modified-at COL --dest URL [flags]
  highwater export  --config FILE [--model NAME]
  highwater status  --dest URL [--model NAME] [--json]
  highwater files   --dest URL --model NAME
  highwater dedupe  --dest URL --model NAME [--memory-limit SIZE] [--keep-tombstones] [--tenant V]
  highwater vacuum  --dest URL --model NAME --older-than DUR [--dry-run]
  highwater verify  --dest URL --model NAME
  highwater ddl     --dest URL --model NAME --engine athena|spark|duckdb [--table-name NAME]

Run 'highwater COMMAND -h' for the flags of a command.
`

// errUsage marks errors in the command line, which exit with 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	env := &environment{stdout: stdout, stderr: stderr, getenv: os.Getenv}
	env.logger = newLogger(stderr)
	cmds := map[string]func(context.Context, *environment, []string) error{
		"export": cmdExport,
		"status": cmdStatus,
		"files":  cmdFiles,
		"dedupe": cmdDedupe,
		"vacuum": cmdVacuum,
		"verify": cmdVerify,
		"ddl":    cmdDDL,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		// The problem goes last: scripts read the last line of stderr.
		fmt.Fprintf(stderr, "%s\nhighwater: unknown command %q\n", usage, args[0])
		return 2
	}
	err := cmd(ctx, env, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "highwater %s: %s\n", args[0], strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	default:
		fmt.Fprintf(stderr, "highwater %s: %s\n", args[0], oneLine(err.Error()))
		return 1
	}
}

// oneLine keeps an error to one line, as scripts read the last line of
// stderr.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// environment is what a subcommand may touch of the process.
type environment struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	logger         *slog.Logger
}

func newLogger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("HIGHWATER_LOG") == "debug" {
		level = slog.LevelDebug
	}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// failpoint returns the hook that HIGHWATER_FAILPOINT=name[:n] arms: the
// process kills itself at the n-th time (default 1) it reaches name, so
// tests can crash it at every point of a run.
func (e *environment) failpoint() func(string) {
	spec := e.getenv("HIGHWATER_FAILPOINT")
	if spec == "" {
		return nil
	}
	name, nth, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 {
		n = 1
	}
	seen := 0
	return func(point string) {
		if point != name {
			return
		}
		if seen++; seen == n {
			fmt.Fprintf(e.stderr, "highwater: failpoint %s reached, killing the process\n", point)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}

// lakeFlags name a model at a destination: the flags of every command that
// reads or rewrites a lake.
type lakeFlags struct {
	dest, model, tenant string
}

func (l *lakeFlags) register(fs *flag.FlagSet, modelUsage string) {
	fs.StringVar(&l.dest, "dest", "", "destination `URL`")
	fs.StringVar(&l.model, "model", "", modelUsage)
	fs.StringVar(&l.tenant, "tenant", "", "tenant `value` for a destination with a {tenant} placeholder")
}

// open opens the destination; a command that acts on one model needs it.
func (l *lakeFlags) open(ctx context.Context, needModel bool) (*destination.Destination, error) {
	switch {
	case l.dest == "" && needModel, needModel && l.model == "":
		return nil, usageErr("--dest and --model are required")
	case l.dest == "":
		return nil, usageErr("--dest is required")
	}
	return destination.Open(ctx, l.dest, l.tenant)
}

// parseFlags parses a subcommand's flags. A flag the flag package refuses
// is a command-line error like the others, and exits 2.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}
