package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/fleet"
)

// TestUsageErrorsTouchNothing checks that every usage or config error
// exits 2 with one line on stderr, before connecting to anything or
// creating anything: the source is a closed port (a connection attempt
// would say "unreachable") and the lake directory must not appear.
func TestUsageErrorsTouchNothing(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	closed := "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=2"
	base := func(extra ...string) []string {
		return append([]string{"export", "--source", closed, "--dest", "file://" + lake, "--table", "items",
			"--primary-key", "id", "--modified-at", "updated_at"}, extra...)
	}
	writeCfg := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("HW_EXIT_SOURCE", closed)
	model := "models:\n  - name: items\n    table: items\n    primary_key: id\n    modified_at: updated_at\n"
	head := "source: ${HW_EXIT_SOURCE}\ndest: file://" + lake + "\n"
	cfg := func(name, body string) []string {
		return []string{"export", "--config", writeCfg(name, body)}
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad compression", base("--compression", "lz5"), `compression "lz5" is not one of`},
		{"page rows zero", base("--page-rows", "0"), "--page-rows 0"},
		{"page rows negative", base("--page-rows", "-3"), "--page-rows -3"},
		{"invalid time zone", base("--time-zone", "Mars/Olympus"), `--time-zone "Mars/Olympus" is not an IANA time zone`},
		{"mem scheme", []string{"export", "--source", closed, "--dest", "mem://x", "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, `unknown scheme "mem"`},
		{"no scheme", []string{"export", "--source", closed, "--dest", lake, "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, "has no scheme"},
		{"no bucket", []string{"export", "--source", closed, "--dest", "s3:///x", "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, "names no bucket"},
		{"tenant without column", base("--tenant", "acme"), "a tenant value is set but no tenant column"},
		{"tenant column without tenant", base("--tenant-column", "org"), "a tenant column is set but no tenant value"},
		{"tenant placeholder without tenant", []string{"export", "--source", closed, "--dest", "file://" + lake + "/{tenant}", "--table", "items", "--primary-key", "id", "--modified-at", "updated_at"}, "{tenant} placeholder but no tenant"},
		{"negative lookback", base("--lookback", "-1s"), "negative"},
		{"half a window", base("--window-start", "2026-01-01"), "needs both"},
		{"two models without config", base("--model", "a,b"), "--model takes one name"},
		{"unknown flag", base("--frobnicate"), "unknown flag: --frobnicate"},
		{"bad log format", base("--log-format", "xml"), `--log-format "xml"`},
		{"bad log level", base("--log-level", "loud"), `--log-level "loud"`},
		{"quiet and verbose", base("-q", "-v"), "-q and -v"},
		{"config unknown key", cfg("unknown.yaml", head+model+"    tabel: x\n"), "field tabel not found"},
		{"config no models", cfg("none.yaml", head+"models: []\n"), "config has no models"},
		{"config unset variable", cfg("unset.yaml", "source: ${HW_EXIT_UNSET}\ndest: file://"+lake+"\n"+model), "HW_EXIT_UNSET"},
		{"config not YAML", cfg("broken.yaml", head+"models: [\n"), "parse config"},
		{"config missing", []string{"export", "--config", filepath.Join(dir, "absent.yaml")}, "no such file"},
		{"config model not there", append(cfg("ok.yaml", head+model), "--model", "nope"), `config has no model named "nope"`},
		{"config bad compression", cfg("codec.yaml", head+"defaults:\n  compression: lz5\n"+model), `compression "lz5"`},
		{"config bad time zone", cfg("tz.yaml", head+model+"    time_zone: Nowhere/City\n"), "Nowhere/City"},
		{"config validate of a bad config", []string{"config", "validate", "--config", writeCfg("v.yaml", head+model+"    page_rows: -1\n")}, "page_rows"},
		{"dedupe bad compression", []string{"dedupe", "--dest", "file://" + lake, "--model", "items", "--compression", "lz5"}, `compression "lz5"`},
		{"vacuum mem scheme", []string{"vacuum", "--dest", "mem://x", "--model", "items", "--older-than", "1h"}, `unknown scheme "mem"`},
		{"status no scheme", []string{"status", "--dest", lake}, "has no scheme"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := highwater(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr is not one line saying %q: %q", tc.want, errOut)
			}
			if strings.Contains(errOut, "unreachable") || strings.Contains(errOut, "connect") {
				t.Errorf("a connection was attempted: %q", errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("the secret was printed: %q", errOut)
			}
			if _, err := os.Stat(lake); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the lake directory was created (%v)", err)
			}
		})
	}
	// The same source and lake, valid otherwise: the failure is the
	// connection's, exit 1, so the cases above did not pass by accident.
	code, _, errOut := highwater(t, base()...)
	if code != exitFailed || !strings.Contains(errOut, "unreachable") {
		t.Fatalf("a valid command line against a closed port: exit %d: %s", code, errOut)
	}
}

// TestInterruptedExits130 runs an export whose context is cancelled, as
// SIGINT cancels it in main.
func TestInterruptedExits130(t *testing.T) {
	db, dest := setupItems(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb strings.Builder
	env := &environment{stdout: &out, stderr: &errb, getenv: os.Getenv}
	code := execute(ctx, env, []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest})
	if code != exitInterrupted || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "run the same command again to resume the run") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestExitCodeClasses maps each class of error to its documented code,
// however deeply it is wrapped.
func TestExitCodeClasses(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(live)
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want int
	}{
		{live, nil, 0},
		{live, errors.New("disk full"), 1},
		{live, usageErr("bad"), 2},
		{live, fmt.Errorf("reconcile: %w", errDifferences), 3},
		{live, fmt.Errorf("commit: %w", export.ErrRaceLost), 4},
		{live, summaryErr(summaryOf(fmt.Errorf("a: %w", export.ErrRaceLost), nil)), 4},
		{live, summaryErr(summaryOf(fmt.Errorf("a: %w", export.ErrRaceLost), errors.New("disk full"))), 1},
		{live, summaryErr(summaryOf(nil, nil)), 0},
		{dead, context.Canceled, 130},
		{dead, usageErr("bad"), 2},
	} {
		if got := exitCode(tc.ctx, tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// summaryOf is the summary of instances that failed with errs, nil for
// done.
func summaryOf(errs ...error) *fleet.Summary {
	s := &fleet.Summary{}
	for i, err := range errs {
		o := fleet.Outcome{Instance: fleet.Instance{Model: fmt.Sprint("m", i)}, Status: fleet.Done, Err: err}
		if err != nil {
			o.Status = fleet.Failed
		}
		s.Outcomes = append(s.Outcomes, o)
	}
	return s
}
