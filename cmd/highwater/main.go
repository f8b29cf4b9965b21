// Command highwater copies PostgreSQL tables into data lakes as
// append-only Parquet files, incrementally, with durable manifests.
//
// The command line is built with spf13/cobra, as kubectl and gh are: it
// gives help with examples on stdout, `highwater help CMD`, shell
// completion and suggestions for mistyped commands, and its pflag flags
// take the --long form every operator expects.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	_ "time/tzdata" // naive timestamps are read in IANA zones, also where the system has no zoneinfo

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/redact"
)

// Exit codes. They are part of the interface: schedulers branch on them.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitDifferences = 3 // reconcile found differences
	exitRaceLost    = 4
	exitInterrupted = 130
)

// exitStatusHelp ends every command's help.
const exitStatusHelp = `

Exit status:
  0    done
  1    the work failed (one line on stderr says why; nothing is committed for the model that failed)
  2    a usage or config error, found before connecting to anything or creating anything
  3    reconcile found differences between the lake and the source
  4    another export of the model committed first: rerun to export from its watermark
  130  interrupted (SIGINT or SIGTERM): rerunning the same command resumes the run`

var (
	// errUsage marks errors in the command line or config, which exit with 2.
	errUsage = errors.New("usage")
	// errDifferences marks a check that found differences, which exits 3.
	errDifferences = errors.New("differences found")
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		stderr = &terminal{f: f}
	}
	env := &environment{stdout: stdout, stderr: stderr, getenv: os.Getenv, build: buildInfo()}
	return execute(ctx, env, args)
}

// execute runs the command line args in env and returns the exit code.
func execute(ctx context.Context, env *environment, args []string) int {
	env.logger = newLogger(env.stderr, logOptions{level: "info"}, env.getenv)
	root := newRoot(env)
	root.SetArgs(args)
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == root && strings.HasPrefix(err.Error(), "unknown command") {
		err = usageErr("%s%s", err.Error(), suggest(root.SuggestionsFor(firstArg(args))))
	}
	code := exitCode(ctx, err)
	msg := oneLine(strings.TrimPrefix(err.Error(), "usage: "))
	if code == exitInterrupted {
		msg = "interrupted (" + msg + "); run the same command again to resume the run"
	}
	fmt.Fprintf(env.stderr, "%s: %s\n", cmd.CommandPath(), msg)
	return code
}

// exitCode classifies the error of a command; ctx is the command's, whose
// cancellation means a signal arrived.
func exitCode(ctx context.Context, err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, export.ErrRaceLost):
		return exitRaceLost
	case errors.Is(err, errDifferences):
		return exitDifferences
	}
	return exitFailed
}

// newRoot builds the command tree.
func newRoot(env *environment) *cobra.Command {
	var logs logOptions
	root := &cobra.Command{
		Use:   "highwater",
		Short: "Copy PostgreSQL tables into data lakes as Parquet, incrementally",
		Long: `highwater copies PostgreSQL tables into data lakes (a local directory, S3, Google Cloud Storage or
Azure Blob Storage) incrementally, as append-only Parquet files with durable manifests that record every
file, the interval it covers and the last key it holds.`,
		Example: `  highwater export --source postgres://user@host/db --table public.orders \
      --primary-key id --modified-at updated_at --dest file:///data/lake
  highwater status --dest file:///data/lake
  highwater help export`,
		Version:       env.build.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Suggestions are added to the one error line by run.
		DisableSuggestions:         true,
		SuggestionsMinimumDistance: 2,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if logs.quiet && logs.verbose {
				return usageErr("-q and -v exclude each other")
			}
			l, err := newLoggerChecked(env.stderr, logs, env.getenv)
			if err != nil {
				return err
			}
			env.logger = l
			return nil
		},
	}
	root.SetVersionTemplate("highwater {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&logs.format, "log-format", "", "log `format`: text or json (default: text on a terminal, json off one)")
	pf.StringVar(&logs.level, "log-level", "info", "log `level`: debug, info, warn or error")
	pf.BoolVarP(&logs.quiet, "quiet", "q", false, "log only errors")
	pf.BoolVarP(&logs.verbose, "verbose", "v", false, "log at debug level")

	root.AddCommand(cmdExport(env), cmdStatus(env), cmdFiles(env), cmdDedupe(env), cmdVacuum(env), cmdVerify(env),
		cmdDDL(env), cmdConfig(env), cmdDeletes(env), cmdIceberg(env), cmdVersion(env), cmdReconcile(env), cmdReset(env))
	root.SetFlagErrorFunc(flagError)
	var finish func(c *cobra.Command)
	finish = func(c *cobra.Command) {
		if c.Args == nil {
			c.Args = noArgs
		}
		c.Long += exitStatusHelp
		for _, sub := range c.Commands() {
			finish(sub)
		}
	}
	for _, c := range root.Commands() {
		finish(c)
	}
	root.Long += exitStatusHelp
	return root
}

func cmdVersion(env *environment) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version and VCS revision of this build",
		Long:    "Print the module version and the VCS revision that this binary was built from, as its build info records them.",
		Example: "  highwater version\n  highwater --version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(env.stdout, "highwater %s\n", env.build)
			return err
		},
	}
}

// build is what the binary knows of itself.
type build struct {
	version, revision string
	modified          bool
}

func buildInfo() build {
	var b build
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

func (b build) String() string {
	v := b.version
	if v == "" {
		v = "(devel)"
	}
	rev := b.revision
	if rev == "" {
		rev = "unknown"
	}
	if b.modified {
		rev += "+modified"
	}
	return v + " (revision " + rev + ")"
}

// formats is the build as written into every Parquet footer.
func (b build) formats() formats.Build {
	rev := b.revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && b.modified {
		rev += "+modified"
	}
	v := b.version
	if v == "(devel)" {
		v = "dev"
	}
	return formats.Build{Version: v, Revision: rev}
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("unexpected argument %q", args[0])
	}
	return nil
}

// flagError makes pflag's refusals usage errors, and adds the nearest
// flag name to an unknown one: cobra suggests commands but not flags.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		if n := nearest(name, names); n != "" {
			msg += " (did you mean --" + n + "?)"
		}
	}
	return usageErr("%s", msg)
}

// nearest returns the name closest to typed within a small edit
// distance, or "".
func nearest(typed string, names []string) string {
	best, bestD := "", 3
	if len(typed) <= 3 {
		bestD = 2
	}
	for _, n := range names {
		if d := levenshtein(typed, n); d < bestD || (strings.HasPrefix(n, typed) && best == "") {
			best, bestD = n, min(d, bestD)
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func suggest(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(names, " or ") + "?"
}

func firstArg(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
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
	build          build
	// hook, when set, is called at the failpoints instead of the one
	// that HIGHWATER_FAILPOINT arms: a test runs another command there,
	// in the same process, to race this one.
	hook func(string)
}

// logOptions are the persistent logging flags.
type logOptions struct {
	format, level  string
	quiet, verbose bool
}

func newLogger(w io.Writer, o logOptions, getenv func(string) string) *slog.Logger {
	l, err := newLoggerChecked(w, o, getenv)
	if err != nil {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return l
}

// newLoggerChecked logs concise text lines on a terminal and JSON lines
// off one, unless --log-format says otherwise.
func newLoggerChecked(w io.Writer, o logOptions, getenv func(string) string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, usageErr("--log-level %q is not one of debug, info, warn, error", o.level)
	}
	if getenv("HIGHWATER_LOG") == "debug" {
		level = slog.LevelDebug
	}
	switch {
	case o.quiet:
		level = slog.LevelError
	case o.verbose:
		level = slog.LevelDebug
	}
	format := o.format
	switch format {
	case "":
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	case "text", "json":
	default:
		return nil, usageErr("--log-format %q is not text or json", o.format)
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

func isTerminal(w io.Writer) bool {
	if _, ok := w.(*terminal); ok {
		return true
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	// A character device is not a terminal: /dev/null is one too, and
	// stderr sent there must not draw the progress line or pay for the
	// estimate behind it.
	return term.IsTerminal(int(f.Fd()))
}

// failpoint returns the hook that HIGHWATER_FAILPOINT=name[:n] arms: the
// process kills itself at the n-th time (default 1) it reaches name, so
// tests can crash it at every point of a run; the environment's hook, when
// set, takes its place.
func (e *environment) failpoint() func(string) {
	if e.hook != nil {
		return e.hook
	}
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
	// tenantSet: tenant is set, even when empty (an instance of a fan-out).
	tenantSet bool
	// tenants holds the --tenant flags; with --config, several select
	// tenants (fleetFlags.runLake).
	tenants []string
	// fleet is set when the command fans out with --config.
	fleet bool
}

func (l *lakeFlags) register(fs *pflag.FlagSet, modelUsage string) {
	fs.StringVar(&l.dest, "dest", "", "destination `URL`")
	fs.StringVar(&l.model, "model", "", modelUsage)
	fs.StringArrayVar(&l.tenants, "tenant", nil, "tenant `value` for a destination with a {tenant} placeholder")
}

// open opens the destination; a command that acts on one model needs it.
// Every check that needs no store is made first, so a usage error creates
// nothing.
func (l *lakeFlags) open(ctx context.Context, needModel bool) (*destination.Destination, error) {
	if err := l.check(needModel); err != nil {
		return nil, err
	}
	return destination.OpenTenant(ctx, l.dest, l.tenantPtr())
}

func (l *lakeFlags) tenantPtr() *string {
	if !l.tenantSet {
		return nil
	}
	return &l.tenant
}

// instanceTenant is the tenant of a model instance of a fan-out
// (--config), which its JSON and metrics name; nil otherwise.
func (l *lakeFlags) instanceTenant() *string {
	if !l.fleet {
		return nil
	}
	return l.tenantPtr()
}

func (l *lakeFlags) check(needModel bool) error {
	if !l.fleet && l.tenants != nil {
		if len(l.tenants) > 1 {
			return usageErr("--tenant takes one value without --config")
		}
		l.tenant, l.tenantSet = l.tenants[0], true
	}
	switch {
	case l.dest == "" && needModel, needModel && l.model == "":
		return usageErr("--dest and --model are required")
	case l.dest == "":
		return usageErr("--dest is required")
	}
	return checkDest(l.dest, l.tenantPtr())
}

// checkDest finds, before anything is opened or created, the destination
// errors that need no store (destination.Check: no scheme, a scheme that
// is not a real destination, no bucket, dot segments, a file URL with a
// host), and a {tenant} placeholder without a tenant.
// destination.Open also knows mem://, a fresh in-memory lake for tests,
// which a command line must refuse: a run into it would vanish.
func checkDest(raw string, tenant *string) error {
	if strings.Contains(raw, "{tenant}") && tenant == nil {
		return usageErr("destination %q has a {tenant} placeholder but no tenant is set: add --tenant", redact.URL(raw))
	}
	if err := destination.Check(raw, tenant); err != nil {
		return usageErr("%v", err)
	}
	if u, _ := url.Parse(raw); strings.EqualFold(u.Scheme, "mem") {
		return usageErr("destination %q: unknown scheme %q: use file, s3, gs, azblob or az", redact.URL(raw), u.Scheme)
	}
	return nil
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}
