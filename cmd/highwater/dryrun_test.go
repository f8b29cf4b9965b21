package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
)

// TestExportDryRun plans exports with --dry-run: into a destination that
// does not exist yet (which must stay absent), and before a second run
// (whose lake must stay byte for byte as it was, with no plan and no
// _runs/ entry added). The plan's from is the one the real run then
// uses, its estimate is near the interval's rows, and --json keeps the
// shape of its golden files.
func TestExportDryRun(t *testing.T) {
	db := pg.NewDatabase(t,
		`CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, name text)`,
		`INSERT INTO items SELECT g, now() - interval '1 hour' + g * interval '1 ms', 'n' || g FROM generate_series(1, 500) g`,
		`ANALYZE items`)
	parent := filepath.Join(t.TempDir(), "absent")
	lake := filepath.Join(parent, "lake")
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", "file://" + lake, "--lookback", "1m"}
	dry := append(export[:len(export):len(export)], "--dry-run")

	code, out, errOut := highwater(t, dry...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"items: dry run, nothing written: a new export run", "[(no lower bound), ", "and the rows whose modified-at is NULL", "rows       about ", "id bigint -> INT64"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q:\n%s", want, out)
		}
	}
	if code, _, errOut := highwater(t, append(dry, "--metrics-file", filepath.Join(t.TempDir(), "m.prom"))...); code != exitUsage {
		t.Errorf("--dry-run with --metrics-file: exit %d, want %d: %s", code, exitUsage, errOut)
	}
	first := dryRunJSONOf(t, dry, "export-dry-run-first", lake)
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Fatalf("a dry run created %s", parent)
	}
	if first.From != nil || !first.IncludeNull || first.BaseSeq != 0 {
		t.Errorf("a first run's plan: from %v, include_null %v, base seq %d", first.From, first.IncludeNull, first.BaseSeq)
	}
	checkEstimate(t, first.EstimatedRows, 500)

	if code, _, errOut := highwater(t, export...); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	pgtest.Exec(t, db, `UPDATE items SET name = 'changed', updated_at = now() WHERE id <= 100`, `ANALYZE items`)
	before := snapshot(t, lake)
	next := dryRunJSONOf(t, dry, "export-dry-run-next", lake)
	if after := snapshot(t, lake); !maps.Equal(before, after) {
		t.Fatalf("a dry run changed the lake:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	if next.From == nil || next.PreviousWatermark == nil || next.BaseSeq != 1 || next.IncludeNull {
		t.Fatalf("a next run's plan: %+v", next)
	}
	checkEstimate(t, next.EstimatedRows, 100)

	// The real run plans the same from: the dry run used its rule.
	if code, _, errOut := highwater(t, export...); code != 0 {
		t.Fatalf("second export: %s", errOut)
	}
	d, err := destination.Open(t.Context(), "file://"+lake, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := manifest.NewLog(d, "items").ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var c *manifest.Commit
	manifest.NewLog(d, "items").History(t.Context(), func(x *manifest.Commit) error { c = x; return nil })
	if st.Seq != 2 || c.Interval.From == nil || *c.Interval.From != *next.From {
		t.Fatalf("the run read from %v, the dry run planned %s", c.Interval.From, *next.From)
	}
}

// TestExportDryRunObjectStore checks that a dry run into a bucket leaves
// it empty.
func TestExportDryRunObjectStore(t *testing.T) {
	dest := cloudtest.S3(t) + "/lake"
	db, _ := setupItems(t)
	code, out, errOut := highwater(t, "export", "--source", db, "--table", "public.items", "--primary-key", "id",
		"--modified-at", "updated_at", "--dest", dest, "--dry-run", "--json")
	if code != 0 || !strings.Contains(out, `"dry_run":true`) {
		t.Fatalf("dry run: exit %d: %s%s", code, out, errOut)
	}
	d, err := destination.Open(t.Context(), strings.TrimSuffix(dest, "/lake"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var keys []string
	if err := d.List(t.Context(), "", func(a objstore.Attrs) error { keys = append(keys, a.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Fatalf("a dry run wrote %q", keys)
	}
}

// dryRunJSONOf runs args with --json, checks its shape against the golden
// file and decodes it.
func dryRunJSONOf(t *testing.T, args []string, golden, lake string) dryRunJSON {
	t.Helper()
	code, out, errOut := highwater(t, append(args[:len(args):len(args)], "--json")...)
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("dry run --json: exit %d: %s%s", code, out, errOut)
	}
	var j dryRunJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("dry run --json printed %q: %v", out, err)
	}
	// The estimate is the planner's, from the table's statistics; the
	// rows done depend on how the dead run batched them; the previous
	// watermark is a time of this run.
	out = dryRunCount.ReplaceAllString(out, `"$1":<$1>`)
	got := normalizeJSON(dryRunWatermark.ReplaceAllString(out, `"previous_watermark":"<previous_watermark>"`), lake)
	path := filepath.Join("testdata", "json", golden+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return j
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s changed shape:\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
	return j
}

var (
	dryRunCount     = regexp.MustCompile(`"(estimated_rows|rows_done)":[0-9]+`)
	dryRunWatermark = regexp.MustCompile(`"previous_watermark":"[^"]*"`)
)

// checkEstimate wants the planner's estimate within a factor of two of
// the rows the interval holds: the table was just analysed.
func checkEstimate(t *testing.T, got *int64, rows int64) {
	t.Helper()
	if got == nil || *got < rows/2 || *got > rows*2 {
		t.Errorf("estimated rows %v, the interval holds %d", got, rows)
	}
}

// snapshot maps every file and directory under dir to a digest of what
// it holds.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if e.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExportDryRunOfAnUnfinishedRun kills an export after its first file,
// and plans with --dry-run: the plan is the dead run's, which the dry run
// says it would resume, with the files it has done, and the lake stays as
// it was. The export then resumes exactly that run.
func TestExportDryRunOfAnUnfinishedRun(t *testing.T) {
	bin := buildBinary(t)
	db := pg.NewDatabase(t,
		`CREATE TABLE items (id bigint PRIMARY KEY, updated_at timestamptz, name text)`,
		`INSERT INTO items SELECT g, now() - interval '1 hour' + g * interval '1 ms', repeat('n', 50) || g FROM generate_series(1, 5000) g`,
		`ANALYZE items`)
	lake := t.TempDir()
	export := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at",
		"--dest", "file://" + lake, "--page-rows", "1000", "--target-file-size", "1KiB"}
	cmd := exec.Command(bin, export...)
	cmd.Env = append(os.Environ(), "HIGHWATER_FAILPOINT=after-checkpoint")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "failpoint after-checkpoint reached") {
		t.Fatalf("the export was not killed after its first file: %v\n%s", err, out)
	}
	before := snapshot(t, lake)
	j := dryRunJSONOf(t, append(export, "--dry-run"), "export-dry-run-resume", lake)
	if after := snapshot(t, lake); !maps.Equal(before, after) {
		t.Fatalf("a dry run changed the lake:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	if !j.Resumed || j.RunID == nil || j.FilesDone != 1 || j.RowsDone <= 0 || j.RowsDone >= 5000 {
		t.Fatalf("the dry run does not plan to resume the dead run: %+v", j)
	}
	checkEstimate(t, j.EstimatedRows, 5000)
	if code, _, errOut := highwater(t, export...); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	code, out, _ := highwater(t, "status", "--dest", "file://"+lake, "--json")
	var l statusLine
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.RunID != *j.RunID || *l.To != j.To {
		t.Fatalf("the export committed %s, the dry run planned to resume run %s to %s", out, *j.RunID, j.To)
	}
}
