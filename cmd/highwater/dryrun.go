package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgsource"
)

// dryRunJSON is one model of `export --dry-run --json`: the plan the run
// would follow. Its fields are an interface, as every --json shape's.
type dryRunJSON struct {
	Model   string  `json:"model"`
	Tenant  *string `json:"tenant,omitempty"`
	DryRun  bool    `json:"dry_run"`
	Kind    string  `json:"kind"`
	Resumed bool    `json:"resumed"`
	// RunID is the unfinished run that would be resumed; null for a new
	// run, whose id is chosen when it starts.
	RunID             *string        `json:"run_id"`
	FilesDone         int            `json:"files_done"`
	RowsDone          int64          `json:"rows_done"`
	From              *string        `json:"from"`
	To                string         `json:"to"`
	IncludeNull       bool           `json:"include_null"`
	IncludeBeyondTo   bool           `json:"include_beyond_to"`
	ToBound           *string        `json:"to_bound"`
	ToBoundDetail     string         `json:"to_bound_detail,omitempty"`
	PreviousWatermark *string        `json:"previous_watermark"`
	BaseSeq           int64          `json:"base_seq"`
	Lookback          string         `json:"lookback"`
	EstimatedRows     *int64         `json:"estimated_rows"`
	Columns           []dryRunColumn `json:"columns"`
	Warnings          []string       `json:"warnings"`
}

type dryRunColumn struct {
	Name       string `json:"name"`
	SourceType string `json:"source_type"`
	Physical   string `json:"physical"`
	Logical    string `json:"logical,omitempty"`
	Repeated   bool   `json:"repeated,omitempty"`
}

func newDryRunJSON(model string, tenant *string, pl *export.Planned) dryRunJSON {
	p := pl.Plan
	j := dryRunJSON{Model: model, Tenant: tenant, DryRun: true, Kind: p.Kind, Resumed: pl.Resumed,
		FilesDone: pl.FilesDone, RowsDone: pl.RowsDone, From: p.Interval.From, To: p.Interval.To,
		IncludeNull: p.Interval.IncludeNull, IncludeBeyondTo: p.Interval.IncludeBeyondTo,
		ToBound: nonEmpty(p.ToBound), ToBoundDetail: p.ToBoundDetail, PreviousWatermark: p.PrevWatermark,
		BaseSeq: p.BaseSeq, Lookback: p.Lookback, EstimatedRows: pl.EstimatedRows, Columns: []dryRunColumn{}, Warnings: []string{}}
	if pl.Resumed {
		j.RunID = &p.RunID
	}
	for _, f := range pl.Schema.Fields {
		j.Columns = append(j.Columns, dryRunColumn{Name: f.Name, SourceType: f.SourceType, Physical: f.Physical, Logical: f.Logical, Repeated: f.Repeated})
	}
	if pl.Warnings != nil {
		j.Warnings = pl.Warnings
	}
	return j
}

// dryRun plans one model instance's export (export.DryRun) and prints
// the plan; it returns the summary's one line.
func dryRun(ctx context.Context, env *environment, src *pgsource.Source, d *destination.Destination, o export.Options,
	name string, tenant *string, asJSON bool, out func(func(io.Writer) error) error) (string, error) {
	pl, err := export.DryRun(ctx, src, d, d.ObjectURL, o)
	if err != nil {
		if asJSON {
			out(func(w io.Writer) error { return writeJSON(w, newExportJSON(o.Model, tenant, nil, err)) })
		}
		return "", err
	}
	j := newDryRunJSON(o.Model, tenant, pl)
	if asJSON {
		return "planned", out(func(w io.Writer) error { return writeJSON(w, j) })
	}
	return "planned", out(func(w io.Writer) error { return printDryRun(w, name, j) })
}

// printDryRun prints the plan for a person: what kind of run, its
// interval and what fixed its end, the estimate and the columns.
func printDryRun(w io.Writer, name string, j dryRunJSON) error {
	var b strings.Builder
	run := "a new " + j.Kind + " run"
	if j.Resumed {
		run = fmt.Sprintf("resumes %s run %s (%d files, %d rows done)", j.Kind, *j.RunID, j.FilesDone, j.RowsDone)
	}
	fmt.Fprintf(&b, "%s: dry run, nothing written: %s\n", name, run)
	from := "(no lower bound)"
	if j.From != nil {
		from = *j.From
	}
	fmt.Fprintf(&b, "  interval   [%s, %s), to fixed by %s", from, j.To, deref(j.ToBound))
	if j.ToBoundDetail != "" {
		fmt.Fprintf(&b, " (%s)", j.ToBoundDetail)
	}
	b.WriteString("\n")
	switch {
	case j.IncludeBeyondTo && j.IncludeNull:
		b.WriteString("             and every row stamped at or after to, or NULL\n")
	case j.IncludeNull:
		b.WriteString("             and the rows whose modified-at is NULL\n")
	}
	fmt.Fprintf(&b, "  watermark  %s, lookback %s, log at seq %d\n", deref(j.PreviousWatermark), j.Lookback, j.BaseSeq)
	rows := "unknown (no planner estimate)"
	if j.EstimatedRows != nil {
		rows = "about " + humanize.Comma(*j.EstimatedRows) + " (the planner's estimate)"
	}
	fmt.Fprintf(&b, "  rows       %s\n", rows)
	cols := make([]string, len(j.Columns))
	for i, c := range j.Columns {
		t := c.Physical
		if c.Logical != "" {
			t = c.Logical
		}
		if c.Repeated {
			t = "LIST<" + t + ">"
		}
		cols[i] = fmt.Sprintf("%s %s -> %s", c.Name, c.SourceType, t)
	}
	fmt.Fprintf(&b, "  columns    %s\n", strings.Join(cols, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}
