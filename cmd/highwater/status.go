package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/internal/fleet"
	"github.com/highwater-dev/highwater/manifest"
)

// statusLine is one commit of the watermark history.
type statusLine struct {
	Model     string            `json:"model"`
	Tenant    *string           `json:"tenant,omitempty"` // of a model instance with tenants (--config)
	Seq       int64             `json:"seq"`
	Committed string            `json:"committed"`
	Kind      string            `json:"kind"`
	RunID     string            `json:"run_id"`
	From      *string           `json:"from"`
	To        *string           `json:"to"`
	Watermark *string           `json:"watermark"`
	Added     int               `json:"files_added"`
	Removed   int               `json:"files_removed"`
	Metrics   *manifest.Metrics `json:"metrics,omitempty"`
	Warnings  []string          `json:"warnings,omitempty"`
	// ToBound is what fixed to (clock, oldest_transaction, replay, window,
	// ...); null for commits that read no interval.
	ToBound *string `json:"to_bound"`
	// ToBoundDetail says what the bound could not see (a role without
	// pg_read_all_stats, a replica) or which transaction held it back.
	ToBoundDetail string `json:"to_bound_detail,omitempty"`
	// DurationSeconds is the run's time from its plan to this commit; null
	// when the commit has no plan (vacuum) or the plan is gone.
	DurationSeconds *float64 `json:"duration_seconds"`
	// Reason is a reset's; Reset and Reconcile are the reports of those
	// kinds (status_reconcile.go).
	Reason    *string                   `json:"reason,omitempty"`
	Reset     *manifest.ResetReport     `json:"reset,omitempty"`
	Reconcile *manifest.ReconcileReport `json:"reconcile,omitempty"`
	// group is what the table names: the model, or the model instance of
	// a tenant in a fan-out.
	group     string
	committed time.Time
}

func cmdStatus(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the watermark history of models, a commit a line",
		Long: `Status prints every commit of a model's log (of every model at the destination without --model): its
sequence number, kind, the interval it read, the watermark, files, rows and tombstones (ROWS/DEL). --json prints one JSON
object per commit per line (docs/cli.md describes its fields).`,
		Example: `  highwater status --dest file:///data/lake
  highwater status --dest file:///data/lake --model orders --json | jq .watermark`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name` (default: every model at the destination)")
	asJSON := fs.Bool("json", false, "print JSON, one object per commit per line (docs/cli.md)")
	wide := fs.Bool("wide", false, "print every column: the interval, the run ID, removed files")
	limit := fs.Int("limit", 0, "print only the last `N` commits of each model (0: all)")
	var ff fleetFlags
	// --json is status' own: the summary of a fleet stays text, on stderr.
	ff.registerLake(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *limit < 0 {
			return usageErr("--limit %d is negative", *limit)
		}
		var mu sync.Mutex
		var lines []statusLine
		collect := func(ctx context.Context, _ *environment, lake *lakeFlags) error {
			if err := lake.check(false); err != nil {
				return err
			}
			d, err := lake.open(ctx, false)
			if err != nil {
				return err
			}
			defer d.Close()
			models := []string{lake.model}
			if lake.model == "" {
				if models, err = manifest.ListModels(ctx, d); err != nil {
					return err
				}
				if len(models) == 0 {
					return fmt.Errorf("no models at %s", d)
				}
			}
			tenant := lake.instanceTenant()
			var mine []statusLine
			for _, m := range models {
				group := m
				if tenant != nil {
					group = fleet.Instance{Model: m, Tenant: tenant}.String()
				}
				log := manifest.NewLog(d, m)
				n := 0
				err := log.History(ctx, func(c *manifest.Commit) error {
					n++
					l := statusLine{Model: m, Tenant: tenant, Seq: c.Seq, Committed: c.Committed.Format("2006-01-02T15:04:05Z"), Kind: c.Kind,
						RunID: c.RunID, Watermark: c.Watermark, Added: len(c.Added), Removed: len(c.Removed), Metrics: c.Metrics, Warnings: c.Warnings,
						ToBoundDetail: c.ToBoundDetail, group: group}
					if c.Interval != nil {
						l.From, l.To = c.Interval.From, &c.Interval.To
					}
					l.ToBound = nonEmpty(c.ToBound)
					l.committed = c.Committed
					l.addReports(c)
					mine = append(mine, l)
					return nil
				})
				if err != nil {
					return fmt.Errorf("read the log of %s: %w", m, err)
				}
				if n == 0 {
					return fmt.Errorf("model %q has no commits at %s", m, d)
				}
			}
			if *limit > 0 {
				mine = lastCommits(mine, *limit)
			}
			if *asJSON {
				for i, l := range mine {
					// A plan read per commit, only for --json: the
					// table does not show durations.
					if l.RunID == "" {
						continue
					}
					if p, err := manifest.NewLog(d, l.Model).ReadPlan(ctx, l.RunID); err == nil {
						mine[i].DurationSeconds = runDuration(p.Created, l.committed)
					}
				}
			}
			mu.Lock()
			lines = append(lines, mine...)
			mu.Unlock()
			return nil
		}
		var printErr error
		print := func() {
			if *limit > 0 {
				lines = lastCommits(lines, *limit)
			}
			if *asJSON {
				enc := json.NewEncoder(env.stdout)
				for _, l := range lines {
					if printErr = enc.Encode(l); printErr != nil {
						return
					}
				}
				return
			}
			printErr = printStatus(env.stdout, lines, *wide)
		}
		// The summary of a fleet goes to stderr: stdout is the table, or
		// JSON lines.
		summaryEnv := *env
		summaryEnv.stdout = env.stderr
		if err := ff.runLake(cmd.Context(), &summaryEnv, &lake, collect, print); err != nil {
			return err
		}
		if ff.config == "" {
			print()
		}
		return printErr
	}
	return cmd
}

func cmdFiles(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "Print the URLs of the committed set, one a line",
		Long: `Files prints the URL of every file in a model's committed set, one a line. Readers must read only
these files: the files of attempts that died are never committed. Each URL is escaped as URLs are
(RFC 3986: a space is %20, a '%' in a tenant's path segment %25), so that parsing it gives the object's
path or key exactly; the symlink manifest and ddl give engines the unescaped paths they take.`,
		Example: `  highwater files --dest file:///data/lake --model orders`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		d, err := lake.open(ctx, true)
		if err != nil {
			return err
		}
		defer d.Close()
		log := manifest.NewLog(d, lake.model)
		st, err := log.ReadState(ctx)
		if err != nil {
			return fmt.Errorf("read the state of %s: %w", lake.model, err)
		}
		if st.Seq == 0 {
			return fmt.Errorf("model %q has no commits at %s", lake.model, d)
		}
		for _, f := range st.Files {
			fmt.Fprintln(env.stdout, d.URL(log.Key(f.Key)))
		}
		return nil
	}
	return cmd
}

// lastCommits keeps the last n lines of each model; lines are grouped by
// model in commit order.
func lastCommits(lines []statusLine, n int) []statusLine {
	var out []statusLine
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && lines[j].group == lines[i].group {
			j++
		}
		out = append(out, lines[max(i, j-n):j]...)
		i = j
	}
	return out
}

// printStatus prints the history as a table that fits 120 columns: the
// model is named once per group, counts and sizes are short, and the
// interval, whose bounds repeat the previous watermark, is left to --wide.
func printStatus(w io.Writer, lines []statusLine, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "MODEL\tSEQ\tCOMMITTED\tKIND\tRUN\tFROM\tTO\tBOUND\tWATERMARK\tFILES\tROWS\tDELETES\tSIZE\tWARNINGS")
	} else {
		fmt.Fprintln(tw, "MODEL\tSEQ\tCOMMITTED\tKIND\tWATERMARK\tFILES\tROWS/DEL\tSIZE\tWARN")
	}
	for i, l := range lines {
		var rows, deletes, size int64
		if l.Metrics != nil {
			rows, deletes, size = l.Metrics.RowsTransferred, l.Metrics.DeletesTransferred, l.Metrics.Bytes
		}
		files := fmt.Sprintf("+%d", l.Added)
		if l.Removed > 0 {
			files += fmt.Sprintf(" -%d", l.Removed)
		}
		model := l.group
		if i > 0 && lines[i-1].group == l.group && !wide {
			model = ""
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", model, l.Seq, l.Committed, l.Kind, l.RunID,
				deref(l.From), deref(l.To), boundOf(l), deref(l.Watermark), files, rows, deletes, size, len(l.Warnings))
			continue
		}
		// Rows and tombstones share a column, so that the table still fits
		// 120 columns.
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%d\n", model, l.Seq, l.Committed, l.Kind,
			shortStamp(deref(l.Watermark)), files, strings.TrimSpace(humanize.SIWithDigits(float64(rows), 1, "")), strings.TrimSpace(humanize.SIWithDigits(float64(deletes), 1, "")),
			humanize.IBytes(uint64(size)), len(l.Warnings))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !wide {
		if err := boundNotes(w, lines); err != nil {
			return err
		}
	}
	return reconcileNotes(w, lines)
}

// boundOf is what fixed the commit's to, or "-" when it read no interval.
func boundOf(l statusLine) string {
	if l.ToBound == nil {
		return "-"
	}
	return *l.ToBound
}

// boundNotes says, below the narrow table, which commits' upper bound was
// not the plain clock: the open-transaction bound held back or blind. The
// table leaves the column out to fit; --wide shows it per commit.
func boundNotes(w io.Writer, lines []statusLine) error {
	type key struct{ model, bound string }
	counts := map[key]int{}
	var order []key
	for _, l := range lines {
		bound := deref(l.ToBound)
		if l.ToBound == nil || bound == "clock" || bound == "window" {
			continue
		}
		k := key{l.group, bound}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	for _, k := range order {
		if _, err := fmt.Fprintf(w, "note: %s: %d commits with upper bound %s (status --wide, or --json for why)\n", k.model, counts[k], k.bound); err != nil {
			return err
		}
	}
	return nil
}

// shortStamp drops the sub-second digits of a watermark: the table shows
// where it stands, --json and --wide its exact value.
func shortStamp(s string) string {
	if i := strings.IndexByte(s, '.'); i > 0 && len(s) > 19 {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return s[:i] + s[j:]
	}
	return s
}
