package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/highwater-dev/highwater/iceberg"
	"github.com/highwater-dev/highwater/internal/icebergtest"
	"github.com/highwater-dev/highwater/internal/pgtest"
)

// seqsOf lists the highwater seqs of a table's live snapshots, oldest first.
func seqsOf(tbl *table.Table) []string {
	snaps := tbl.Metadata().Snapshots()
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].SequenceNumber < snaps[j].SequenceNumber })
	var out []string
	for _, s := range snaps {
		out = append(out, s.Summary.Properties[iceberg.SummarySeq])
	}
	return out
}

// checkNames compares the newest name of every key as iceberg-go reads the
// table with the source.
func checkNames(t *testing.T, db string, tbl *table.Table) {
	t.Helper()
	got := map[string]string{}
	for id, r := range icebergtest.Latest(icebergtest.Rows(t, tbl, 0), "id", "updated_at") {
		got[id] = r["name"]
	}
	want := map[string]string{}
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), "SELECT id::text, name FROM items")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			t.Fatal(err)
		}
		want[id] = name
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Iceberg reads %d keys, the source has %d", len(got), len(want))
	}
	for id, n := range want {
		if got[id] != n {
			t.Fatalf("key %s: Iceberg reads %q, the source has %q", id, got[id], n)
		}
	}
}

// TestIcebergCrashRepairAndVacuum: an export killed between its commit and
// its snapshot leaves the view behind; the next command that commits (a
// dedupe) repairs it; a vacuum expires the snapshots that name the files it
// deletes, so that every live snapshot still reads.
func TestIcebergCrashRepairAndVacuum(t *testing.T) {
	db, dest := setupItems(t)
	location := dest + "/items"
	args := []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest}
	if code, _, errOut := highwater(t, append(args, "--table-format", "iceberg")...); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	// Seq 1 the export, seq 2 the opt-in: the new view is one snapshot of
	// the head.
	if got := seqsOf(icebergtest.Open(t, location, nil)); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("snapshots %v, want [2]", got)
	}
	checkNames(t, db, icebergtest.Open(t, location, nil))

	pgtest.Exec(t, db, `UPDATE items SET name = 'changed', updated_at = now() WHERE id <= 5`)
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), "HIGHWATER_FAILPOINT=iceberg-before-sync")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 || !strings.Contains(string(out), "failpoint iceberg-before-sync reached") {
		t.Fatalf("the export was not killed at the failpoint: %v\n%s", err, out)
	}
	if got := seqsOf(icebergtest.Open(t, location, nil)); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("after the crash the view has snapshots %v, want it behind at [2]", got)
	}

	if code, _, errOut := highwater(t, "dedupe", "--dest", dest, "--model", "items"); code != 0 {
		t.Fatalf("dedupe: %s", errOut)
	}
	tbl := icebergtest.Open(t, location, nil)
	if got := seqsOf(tbl); !slices.Equal(got, []string{"2", "3", "4"}) {
		t.Fatalf("after the dedupe the view has snapshots %v, want [2 3 4]", got)
	}
	checkNames(t, db, tbl)

	before := countParts(t, location)
	if code, _, errOut := highwater(t, "vacuum", "--dest", dest, "--model", "items", "--older-than", "1ns"); code != 0 {
		t.Fatalf("vacuum: %s", errOut)
	}
	tbl = icebergtest.Open(t, location, nil)
	for _, s := range tbl.Metadata().Snapshots() {
		icebergtest.Rows(t, tbl, s.SnapshotID) // fails on a missing file
	}
	checkNames(t, db, tbl)
	if after := countParts(t, location); after >= before {
		t.Fatalf("vacuum deleted nothing: %d data files before, %d after", before, after)
	}

	// A lost view is rebuilt from the log: one snapshot of the head, the
	// vacuum's commit that forgot the runs whose plans it deleted.
	if err := os.RemoveAll(strings.TrimPrefix(location, "file://") + "/metadata"); err != nil {
		t.Fatal(err)
	}
	code, outS, errOut := highwater(t, "iceberg", "sync", "--dest", dest, "--model", "items")
	if code != 0 || !strings.Contains(outS, "at seq 5 (was 0)") {
		t.Fatalf("iceberg sync: exit %d: %s%s", code, outS, errOut)
	}
	tbl = icebergtest.Open(t, location, nil)
	if got := seqsOf(tbl); !slices.Equal(got, []string{"5"}) {
		t.Fatalf("the rebuilt view has snapshots %v, want [4]", got)
	}
	checkNames(t, db, tbl)

	// Registered in a SQL catalog; the command prints no secret.
	catURL := withPassword(pg.NewDatabase(t), secret)
	code, outS, errOut = highwater(t, "iceberg", "register", "--dest", dest, "--model", "items", "--catalog", catURL, "--namespace", "prod")
	if code != 0 || !strings.Contains(outS, "entry prod.items now points at "+location+"/metadata/") {
		t.Fatalf("iceberg register: exit %d: %s%s", code, outS, errOut)
	}
	if strings.Contains(outS+errOut, secret) {
		t.Fatalf("register printed the password")
	}
	if code, _, errOut := highwater(t, "iceberg", "register", "--dest", dest, "--model", "items", "--catalog", "thrift://hms:9083"); code != 2 {
		t.Fatalf("a catalog of an unknown kind: exit %d, want 2: %s", code, errOut)
	}

	// ddl names the newest metadata file, the one iceberg-go reads.
	hint, err := os.ReadFile(strings.TrimPrefix(location, "file://") + "/metadata/version-hint.text")
	if err != nil {
		t.Fatal(err)
	}
	for engine, want := range map[string]string{
		"trino":  "metadata_file_name => 'v" + string(hint) + ".metadata.json'",
		"duckdb": "iceberg_scan('" + location + "/metadata/v" + string(hint) + ".metadata.json')",
		"spark":  "iceberg.`" + location + "`",
	} {
		code, outS, errOut := highwater(t, "ddl", "--dest", dest, "--model", "items", "--table-format", "iceberg", "--engine", engine)
		if code != 0 || !strings.Contains(outS, want) {
			t.Fatalf("ddl --engine %s: exit %d, want %s in:\n%s%s", engine, code, want, outS, errOut)
		}
	}
	if code, _, _ := highwater(t, "ddl", "--dest", dest, "--model", "items", "--table-format", "iceberg", "--engine", "hive"); code != 2 {
		t.Fatalf("ddl of an unknown engine: exit %d, want 2", code)
	}
}

func countParts(t *testing.T, location string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(strings.TrimPrefix(location, "file://")+"/data", func(p string, _ os.DirEntry, err error) error {
		if strings.HasSuffix(p, ".parquet") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMeasureIcebergNoChange times a no-change export with and without the
// Iceberg view at 1 and 500 commits of history, and the size of the newest
// metadata file. It asserts no duration: it reports them, when
// HIGHWATER_MEASURE=1 (it runs 1,000 exports).
func TestMeasureIcebergNoChange(t *testing.T) {
	if os.Getenv("HIGHWATER_MEASURE") == "" {
		t.Skip("set HIGHWATER_MEASURE=1 to measure")
	}
	db, plain := setupItems(t)
	withIceberg := "file://" + t.TempDir()
	args := func(dest string) []string {
		return []string{"export", "--source", db, "--table", "public.items", "--primary-key", "id", "--modified-at", "updated_at", "--dest", dest, "-q"}
	}
	one := func(dest string, extra ...string) time.Duration {
		start := time.Now()
		if code, _, errOut := highwater(t, append(args(dest), extra...)...); code != 0 {
			t.Fatalf("export: %s", errOut)
		}
		return time.Since(start)
	}
	one(plain)
	one(withIceberg, "--table-format", "iceberg")
	commits := 1
	for _, at := range []int{1, 500} {
		for commits < at {
			one(plain)
			one(withIceberg)
			commits++
		}
		var dp, di []time.Duration
		for range 7 {
			dp = append(dp, one(plain))
			di = append(di, one(withIceberg))
		}
		commits += 7
		slices.Sort(dp)
		slices.Sort(di)
		hint, _ := os.ReadFile(strings.TrimPrefix(withIceberg, "file://") + "/items/metadata/version-hint.text")
		fi, _ := os.Stat(strings.TrimPrefix(withIceberg, "file://") + "/items/metadata/v" + string(hint) + ".metadata.json")
		var size int64
		if fi != nil {
			size = fi.Size()
		}
		t.Logf("no-change export at %d commits: median %s without Iceberg, %s with (%+.0f%%); metadata v%s is %d bytes",
			at, dp[3].Round(time.Millisecond), di[3].Round(time.Millisecond), 100*(float64(di[3])/float64(dp[3])-1), hint, size)
	}
}

// TestIcebergFromConfig: table_format in a config publishes that model
// only; an unknown format is a usage error that touches nothing.
func TestIcebergFromConfig(t *testing.T) {
	db, dest := setupItems(t)
	pgtest.Exec(t, db, `CREATE TABLE other (k text PRIMARY KEY, changed date)`, `INSERT INTO other VALUES ('a', '2026-01-01')`)
	cfg := filepath.Join(t.TempDir(), "highwater.yaml")
	t.Setenv("HW_TEST_SOURCE", db)
	write := func(format string) {
		os.WriteFile(cfg, []byte(`
source: ${HW_TEST_SOURCE}
dest: `+dest+`
models:
  - name: items
    table: public.items
    primary_key: [id]
    modified_at: updated_at
    table_format: `+format+`
  - name: other
    table: other
    primary_key: [k]
    modified_at: changed
`), 0o644)
	}
	write("delta")
	if code, _, errOut := highwater(t, "export", "--config", cfg); code != 2 || !strings.Contains(errOut, `table_format "delta"`) {
		t.Fatalf("an unknown table format: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(strings.TrimPrefix(dest, "file://") + "/items"); !os.IsNotExist(err) {
		t.Fatalf("the refused config touched the lake: %v", err)
	}
	write("iceberg")
	if code, _, errOut := highwater(t, "export", "--config", cfg); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	checkNames(t, db, icebergtest.Open(t, dest+"/items", nil))
	if _, err := os.Stat(strings.TrimPrefix(dest, "file://") + "/other/metadata"); !os.IsNotExist(err) {
		t.Fatalf("the model without table_format has an Iceberg view: %v", err)
	}
}
