package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/manifest"
)

// runFigures are what --metrics-file reports of one model's run.
type runFigures struct {
	model string
	// tenant is that of a model instance of a fan-out (--config), which
	// is labelled with it so that its series are its own.
	tenant *string
	failed bool
	// Of a run that committed:
	commit   *manifest.Commit
	duration time.Duration
}

// metric is one family of the metrics file.
type metric struct {
	name, help string
	value      func(f runFigures) (float64, bool)
}

var metricFamilies = []metric{
	{"highwater_last_success_timestamp_seconds", "Unix time of the run's commit; absent for a model whose run failed.",
		func(f runFigures) (float64, bool) {
			if f.commit == nil {
				return 0, false
			}
			return float64(f.commit.Committed.UnixMicro()) / 1e6, true
		}},
	{"highwater_watermark_lag_seconds", "Commit time minus the committed watermark, for a timestamp or date modified-at column.",
		func(f runFigures) (float64, bool) {
			if f.commit == nil || f.commit.Watermark == nil {
				return 0, false
			}
			wm, ok := watermarkTime(*f.commit.Watermark, f.commit.Identity.TimeZone)
			if !ok {
				return 0, false
			}
			return f.commit.Committed.Sub(wm).Seconds(), true
		}},
	{"highwater_rows_transferred", "Rows read by the run (an export) or rewritten (a dedupe's input rows).",
		metricOf(func(m *manifest.Metrics) int64 { return m.RowsTransferred })},
	{"highwater_deletes_transferred", "Tombstones the run wrote: rows a soft-delete column marks deleted, and delete log entries.",
		metricOf(func(m *manifest.Metrics) int64 { return m.DeletesTransferred })},
	{"highwater_files_written", "Files the run wrote.", metricOf(func(m *manifest.Metrics) int64 { return m.Files })},
	{"highwater_bytes_written", "Bytes of the files the run wrote.", metricOf(func(m *manifest.Metrics) int64 { return m.Bytes })},
	{"highwater_run_duration_seconds", "The run's time, from its plan to its commit.",
		func(f runFigures) (float64, bool) { return f.duration.Seconds(), f.commit != nil }},
	{"highwater_run_failures", "1 when the model's run failed, 0 when it committed.",
		func(f runFigures) (float64, bool) {
			if f.failed {
				return 1, true
			}
			return 0, true
		}},
}

func metricOf(get func(*manifest.Metrics) int64) func(runFigures) (float64, bool) {
	return func(f runFigures) (float64, bool) {
		if f.commit == nil || f.commit.Metrics == nil {
			return 0, false
		}
		return float64(get(f.commit.Metrics)), true
	}
}

// writeMetricsFile writes the figures in the Prometheus text format for
// node_exporter's textfile collector, atomically: the collector may read
// the file at any moment, so it sees the previous run's or this one's.
func writeMetricsFile(path, command string, figs []runFigures) error {
	var b strings.Builder
	for _, m := range metricFamilies {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.help, m.name)
		for _, f := range figs {
			if v, ok := m.value(f); ok {
				tenant := ""
				if f.tenant != nil {
					tenant = ",tenant=" + labelValue(*f.tenant)
				}
				fmt.Fprintf(&b, "%s{command=%s,model=%s%s} %s\n", m.name, strconv.Quote(command), strconv.Quote(f.model), tenant,
					strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write metrics file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing left to remove
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write metrics file: %w", err)
	}
	return nil
}

// labelValue quotes a label value as the text format escapes it: only
// backslash, double quote and line feed. strconv.Quote would write \t or
// \x escapes, which the format does not know, for a tenant that holds
// them.
func labelValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

// watermarkTime reads a watermark as the instant it stands for: a
// timestamptz as it is, a naive timestamp or a date in the time zone the
// commit records.
func watermarkTime(wm, tz string) (time.Time, bool) {
	if t, err := time.Parse("2006-01-02 15:04:05.999999-07", wm); err == nil {
		return t, true
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return time.Time{}, false
		}
		loc = l
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, wm, loc); err == nil {
			return t, true
		}
	}
	return time.Time{}, false // infinity, BC
}
