package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsFile parses what --metrics-file writes, as node_exporter's
// textfile collector does, after a multi-model export of which one model
// fails, and after a dedupe.
func TestMetricsFile(t *testing.T) {
	db, dest := setupItems(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "highwater.yaml")
	os.WriteFile(cfg, []byte("source: "+db+"\ndest: "+dest+`
models:
  - name: items
    table: public.items
    primary_key: id
    modified_at: updated_at
  - name: broken
    table: public.nope
    primary_key: id
    modified_at: updated_at
`), 0o600)
	prom := filepath.Join(dir, "highwater.prom")
	before := time.Now()
	code, _, errOut := highwater(t, "export", "--config", cfg, "--metrics-file", prom)
	if code != exitFailed {
		t.Fatalf("export with a broken model: exit %d, want 1: %s", code, errOut)
	}
	fams := parseMetrics(t, prom)
	get := func(name, model string) (float64, bool) {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model"] == model && labels["command"] != "" {
				return m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	if v, ok := get("highwater_rows_transferred", "items"); !ok || v != 500 {
		t.Errorf("rows_transferred of items: %v %v, want 500", v, ok)
	}
	if v, ok := get("highwater_files_written", "items"); !ok || v != 1 {
		t.Errorf("files_written of items: %v %v, want 1", v, ok)
	}
	if v, ok := get("highwater_bytes_written", "items"); !ok || v <= 0 {
		t.Errorf("bytes_written of items: %v %v", v, ok)
	}
	if v, ok := get("highwater_last_success_timestamp_seconds", "items"); !ok || v < float64(before.Unix()) {
		t.Errorf("last success of items: %v %v, want after %d", v, ok, before.Unix())
	}
	// The rows are stamped up to an hour ago and the watermark is the
	// source's clock, so the lag is small and not negative.
	if v, ok := get("highwater_watermark_lag_seconds", "items"); !ok || v < 0 || v > 3600 {
		t.Errorf("watermark lag of items: %v %v", v, ok)
	}
	if v, ok := get("highwater_run_failures", "items"); !ok || v != 0 {
		t.Errorf("failures of items: %v %v, want 0", v, ok)
	}
	if v, ok := get("highwater_run_failures", "broken"); !ok || v != 1 {
		t.Errorf("failures of broken: %v %v, want 1", v, ok)
	}
	if _, ok := get("highwater_last_success_timestamp_seconds", "broken"); ok {
		t.Error("a failed model has a last success time")
	}
	if _, ok := get("highwater_run_duration_seconds", "items"); !ok {
		t.Error("no run duration for items")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".highwater.prom.*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}

	dprom := filepath.Join(dir, "dedupe.prom")
	if code, _, errOut := highwater(t, "dedupe", "--dest", dest, "--model", "items", "--metrics-file", dprom); code != 0 {
		t.Fatalf("dedupe: exit %d: %s", code, errOut)
	}
	fams = parseMetrics(t, dprom)
	if v, ok := get("highwater_rows_transferred", "items"); !ok || v != 500 {
		t.Errorf("dedupe rows: %v %v, want 500", v, ok)
	}

	code, _, errOut = highwater(t, "export", "--config", cfg, "--metrics-file", filepath.Join(dir, "absent", "x.prom"))
	if code != exitUsage || !strings.Contains(errOut, "directory does not exist") {
		t.Errorf("metrics file in a missing directory: exit %d: %s", code, errOut)
	}
}

func parseMetrics(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		b, _ := os.ReadFile(path)
		t.Fatalf("parse %s: %v\n%s", path, err, b)
	}
	return fams
}
