package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// statusLine is one commit of the watermark history.
type statusLine struct {
	Model     string            `json:"model"`
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

	// ToBound says what fixed to, and its detail what the bound could not
	// see (a role without pg_read_all_stats, a replica).
	ToBound       string `json:"to_bound,omitempty"`
	ToBoundDetail string `json:"to_bound_detail,omitempty"`
}

func cmdStatus(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var lake lakeFlags
	lake.register(fs, "model `name` (default: every model at the destination)")
	asJSON := fs.Bool("json", false, "print JSON, one object per commit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	d, err := lake.open(ctx, false)
	if err != nil {
		return err
	}
	defer d.Close()
	models := []string{lake.model}
	if lake.model == "" {
		if models, err = listModels(ctx, d); err != nil {
			return err
		}
		if len(models) == 0 {
			return fmt.Errorf("no models at %s", d)
		}
	}
	var lines []statusLine
	for _, m := range models {
		log := manifest.NewLog(d, m)
		n := 0
		err := log.History(ctx, func(c *manifest.Commit) error {
			n++
			l := statusLine{Model: m, Seq: c.Seq, Committed: c.Committed.Format("2006-01-02T15:04:05Z"), Kind: c.Kind,
				RunID: c.RunID, Watermark: c.Watermark, Added: len(c.Added), Removed: len(c.Removed), Metrics: c.Metrics, Warnings: c.Warnings,
				ToBound: c.ToBound, ToBoundDetail: c.ToBoundDetail}
			if c.Interval != nil {
				l.From, l.To = c.Interval.From, &c.Interval.To
			}
			lines = append(lines, l)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the log of %s: %w", m, err)
		}
		if n == 0 {
			return fmt.Errorf("model %q has no commits at %s", m, d)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSEQ\tCOMMITTED\tKIND\tFROM\tTO\tBOUND\tWATERMARK\tFILES\tROWS\tWARNINGS")
	for _, l := range lines {
		rows := int64(0)
		if l.Metrics != nil {
			rows = l.Metrics.RowsTransferred
		}
		files := fmt.Sprintf("+%d", l.Added)
		if l.Removed > 0 {
			files += fmt.Sprintf(" -%d", l.Removed)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", l.Model, l.Seq, l.Committed, l.Kind,
			deref(l.From), deref(l.To), cmp.Or(l.ToBound, "-"), deref(l.Watermark), files, rows, len(l.Warnings))
	}
	return tw.Flush()
}

// listModels finds the models at a destination by their logs.
func listModels(ctx context.Context, d objstore.Bucket) ([]string, error) {
	seen := map[string]bool{}
	err := d.List(ctx, "", func(a objstore.Attrs) error {
		if dir, file := path.Split(a.Key); strings.HasSuffix(dir, "/_manifests/") && strings.HasSuffix(file, ".json") {
			seen[strings.TrimSuffix(dir, "/_manifests/")] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	var models []string
	for m := range seen {
		models = append(models, m)
	}
	sort.Strings(models)
	return models, nil
}

func cmdFiles(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("files", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var lake lakeFlags
	lake.register(fs, "model `name`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
		fmt.Fprintln(env.stdout, d.ObjectURL(log.Key(f.Key)))
	}
	return nil
}
