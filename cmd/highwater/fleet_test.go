package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
)

// hostileTenants are tenant values that are not path segments as written.
var hostileTenants = []string{"", "a/b", "two words", "ünï 码", "..", "100%", `back\slash`, "a%2Fb"}

// summaryJSON is what export --json prints.
type summaryJSON struct {
	Done, Failed, Skipped int
	OtherShards           int `json:"other_shards"`
	Instances             []struct {
		Model, Status, Error string
		Tenant               *string
	}
}

// parseSummary reads the output of --json with --config: one object per
// model instance that ran (a failed one may have none), each naming its
// model, then the summary.
func parseSummary(t *testing.T, out string) summaryJSON {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s summaryJSON
	if json.Unmarshal([]byte(lines[len(lines)-1]), &s) != nil {
		t.Fatalf("--json did not end with the summary:\n%s", out)
	}
	for _, l := range lines[:len(lines)-1] {
		var inst struct{ Model string }
		if json.Unmarshal([]byte(l), &inst) != nil || inst.Model == "" {
			t.Fatalf("--json printed a line that is not an instance's object:\n%s", out)
		}
	}
	if n := len(lines) - 1; n < s.Done || n > s.Done+s.Failed {
		t.Fatalf("--json printed %d instance objects for %d done and %d failed:\n%s", n, s.Done, s.Failed, out)
	}
	return s
}

// setupOrgs makes a table of events over the given tenants, with the
// tenant index, and a table orgs naming them; tenant i has 40+3i rows.
func setupOrgs(t *testing.T, tenants []string) string {
	db := pg.NewDatabase(t,
		`CREATE TABLE orgs (name text PRIMARY KEY)`,
		`CREATE TABLE events (id bigint PRIMARY KEY, org text NOT NULL, updated_at timestamptz NOT NULL, v int)`,
		`CREATE INDEX ON events (org, updated_at, id)`)
	for i, tn := range tenants {
		addOrg(t, db, tn, 40+3*i)
	}
	return db
}

func addOrg(t *testing.T, db, tenant string, rows int) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `INSERT INTO orgs VALUES ($1)`, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO events
		SELECT coalesce((SELECT max(id) FROM events), 0) + g, $1, now() - interval '1 hour' + g * interval '1 ms', g
		FROM generate_series(1, $2::int) g`, tenant, rows); err != nil {
		t.Fatal(err)
	}
}

// pgRowsOf counts a tenant's rows and sums their v, the lake's to match.
func pgRowsOf(t *testing.T, db, tenant string) (n, sum int64) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if err := conn.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(v), 0) FROM events WHERE org = $1`, tenant).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	return n, sum
}

// tenantLake reads a tenant's committed set with DuckDB, deduplicated by
// key to the last version: its row count, the sum of v, the distinct org
// values and the head commit.
func tenantLake(t *testing.T, destTmpl, model, tenant string) (n, sum int64, orgs []string, seq int64) {
	t.Helper()
	d, err := destination.OpenTenant(t.Context(), destTmpl, &tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	log := manifest.NewLog(d, model)
	st, err := log.ReadState(t.Context())
	if err != nil {
		t.Fatalf("tenant %q: %v", tenant, err)
	}
	var paths []string
	for _, f := range st.Files {
		p := strings.TrimPrefix(d.ObjectURL(log.Key(f.Key)), "file://")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("tenant %q: committed file %s: %v", tenant, p, err)
		}
		paths = append(paths, "'"+strings.ReplaceAll(p, "'", "''")+"'")
	}
	if len(paths) == 0 {
		return 0, 0, nil, int64(st.Seq)
	}
	ddb, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ddb.Close()
	last := `(SELECT * FROM read_parquet([` + strings.Join(paths, ",") + `]) QUALIFY row_number() OVER (PARTITION BY id ORDER BY updated_at DESC, v DESC) = 1)`
	if err := ddb.QueryRow(`SELECT count(*), coalesce(sum(v), 0) FROM `+last).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	rows, err := ddb.Query(`SELECT DISTINCT org FROM ` + last)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		rows.Scan(&o)
		orgs = append(orgs, o)
	}
	return n, sum, orgs, int64(st.Seq)
}

func checkTenantLake(t *testing.T, db, destTmpl, tenant string) int64 {
	t.Helper()
	wantN, wantSum := pgRowsOf(t, db, tenant)
	n, sum, orgs, seq := tenantLake(t, destTmpl, "events", tenant)
	if n != wantN || sum != wantSum || !slices.Equal(orgs, []string{tenant}) {
		t.Fatalf("tenant %q: lake holds %d rows (sum %d) of %q, source %d rows (sum %d)", tenant, n, sum, orgs, wantN, wantSum)
	}
	return seq
}

// doneOnce checks that the summaries name every tenant once as done
// between them, and no other.
func doneOnce(t *testing.T, tenants []string, sums ...summaryJSON) {
	t.Helper()
	seen := map[string]int{}
	for _, s := range sums {
		if s.Failed != 0 || s.Skipped != 0 {
			t.Fatalf("summary %+v", s)
		}
		for _, in := range s.Instances {
			if in.Status != "done" || in.Tenant == nil || in.Model != "events" {
				t.Fatalf("instance %+v", in)
			}
			seen[*in.Tenant]++
		}
	}
	for _, tn := range tenants {
		if seen[tn] != 1 {
			t.Fatalf("tenant %q exported %d times this round", tn, seen[tn])
		}
	}
	if len(seen) != len(tenants) {
		t.Fatalf("exported %d tenants, want %d", len(seen), len(tenants))
	}
}

func writeConfig(t *testing.T, db, dest, tenantsYAML string) string {
	cfg := filepath.Join(t.TempDir(), "highwater.yaml")
	doc := fmt.Sprintf(`source: %s
dest: %s
models:
  - name: events
    table: public.events
    primary_key: id
    modified_at: updated_at
    tenant_column: org
    page_rows: 16
%s
`, db, dest, tenantsYAML)
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// highwaterConns is the peak number of highwater sessions on the server
// seen while run runs.
func highwaterConns(t *testing.T, db string, run func()) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			var n int64
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'highwater'`).Scan(&n); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	run()
	close(stop)
	wg.Wait()
	return int(peak.Load())
}

// TestTenantsQueryFleet fans a model out over a tenants_query of 14
// tenants, hostile values among them, runs two shards of it at once with
// --parallel 4, then adds a tenant and removes one and runs again: every
// tenant's lake equals its rows, each tenant is exported once a round,
// the removed tenant is left alone, and no process holds more than
// --parallel + 1 source connections.
func TestTenantsQueryFleet(t *testing.T) {
	tenants := append([]string{"t0", "t1", "t2", "t3", "t4", "t5"}, hostileTenants...)
	db := setupOrgs(t, tenants)
	root := t.TempDir()
	dest := "file://" + root + "/lake/{tenant}"
	cfg := writeConfig(t, db, dest, "    tenants_query: SELECT name FROM orgs ORDER BY name")

	var outs [2]string
	var wg sync.WaitGroup
	peak := highwaterConns(t, db, func() {
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, out, errOut := highwater(t, "export", "--config", cfg, "--parallel", "4", "--shard", fmt.Sprintf("%d/2", i), "--json")
				if code != 0 {
					t.Errorf("shard %d/2: exit %d\n%s\n%s", i, code, out, errOut)
				}
				outs[i] = out
			}()
		}
		wg.Wait()
	})
	if t.Failed() {
		t.FailNow()
	}
	if peak > 2*(4+1) {
		t.Fatalf("two processes of --parallel 4 held %d source connections at once", peak)
	}
	s0, s1 := parseSummary(t, outs[0]), parseSummary(t, outs[1])
	if s0.OtherShards != len(s1.Instances) || s1.OtherShards != len(s0.Instances) {
		t.Fatalf("shards do not split the fleet: %+v %+v", s0, s1)
	}
	doneOnce(t, tenants, s0, s1)
	seqs := map[string]int64{}
	for _, tn := range tenants {
		seqs[tn] = checkTenantLake(t, db, dest, tn)
	}
	entries, _ := os.ReadDir(root + "/lake")
	if len(entries) != len(tenants) {
		t.Fatalf("the lake holds %d tenant directories, want %d", len(entries), len(tenants))
	}

	// A tenant joins, one leaves; rows change in a remaining tenant and in
	// the one that left.
	addOrg(t, db, "late comer", 33)
	pgtest.Exec(t, db, `DELETE FROM orgs WHERE name = 't3'`,
		`UPDATE events SET v = v + 1000, updated_at = now() WHERE org IN ('t1', 't3', 'a/b') AND id % 2 = 0`)
	removedBefore := lakeSnapshot(t, root+"/lake/t3")
	round2 := append(slices.DeleteFunc(slices.Clone(tenants), func(s string) bool { return s == "t3" }), "late comer")
	var out string
	peak = highwaterConns(t, db, func() {
		var code int
		var errOut string
		code, out, errOut = highwater(t, "export", "--config", cfg, "--parallel", "3", "--json", "--lookback", "1h")
		if code != 0 {
			t.Fatalf("round 2: exit %d\n%s\n%s", code, out, errOut)
		}
	})
	if peak > 3+1 {
		t.Fatalf("--parallel 3 held %d source connections at once", peak)
	}
	doneOnce(t, round2, parseSummary(t, out))
	for _, tn := range round2 {
		seq := checkTenantLake(t, db, dest, tn)
		if want := seqs[tn] + 1; seq != want {
			t.Fatalf("tenant %q is at seq %d, want %d", tn, seq, want)
		}
	}
	sameLake(t, removedBefore, lakeSnapshot(t, root+"/lake/t3"))
	if n, _ := pgRowsOf(t, db, "t3"); n == 0 {
		t.Fatal("the removed tenant's rows are gone from the source; the test proves nothing")
	}
}

// TestTenantFailureIsolated makes one tenant's lake unwritable (its
// directory is a file): the others commit, the summary names the failed
// one with its reason, and the exit code is 1; --tenant selects tenants.
func TestTenantFailureIsolated(t *testing.T) {
	tenants := []string{"a", "b", "c", "d", "e"}
	db := setupOrgs(t, tenants)
	root := t.TempDir()
	dest := "file://" + root + "/lake/{tenant}"
	cfg := writeConfig(t, db, dest, "    tenants: [a, b, c, d, e]")
	os.MkdirAll(root+"/lake", 0o755)
	if err := os.WriteFile(root+"/lake/c", []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := highwater(t, "export", "--config", cfg, "--parallel", "2")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "summary: 4 done, 1 failed, 0 skipped\n") || !strings.Contains(out, `failed events["c"]: `) ||
		!strings.Contains(lastLine(errOut), `1 of 5 model instances failed`) {
		t.Fatalf("summary:\n%s\nstderr:\n%s", out, errOut)
	}
	for _, tn := range []string{"a", "b", "d", "e"} {
		checkTenantLake(t, db, dest, tn)
	}
	code, out, _ = highwater(t, "export", "--config", cfg, "--json")
	if s := parseSummary(t, out); code != 1 || s.Done != 4 || s.Failed != 1 || s.Instances[2].Error == "" || *s.Instances[2].Tenant != "c" {
		t.Fatalf("--json: exit %d %+v", code, s)
	}

	// --tenant picks tenants; one the config does not list is a usage error.
	os.Remove(root + "/lake/c")
	code, out, errOut = highwater(t, "export", "--config", cfg, "--tenant", "c", "--tenant", "a", "--json")
	if s := parseSummary(t, out); code != 0 || s.Done != 2 || len(s.Instances) != 2 {
		t.Fatalf("--tenant c --tenant a: exit %d %+v %s", code, s, errOut)
	}
	checkTenantLake(t, db, dest, "c")
	code, _, errOut = highwater(t, "export", "--config", cfg, "--tenant", "zz")
	if code != 2 || !strings.Contains(errOut, `--tenant "zz" is not a tenant`) {
		t.Fatalf("unknown tenant: exit %d %s", code, errOut)
	}
}

// TestTenantValuesAsFlags exports hostile tenant values one at a time from
// flags, as before the config could list them: '/' was refused.
func TestTenantValuesAsFlags(t *testing.T) {
	db := setupOrgs(t, hostileTenants)
	dest := "file://" + t.TempDir() + "/lake/{tenant}"
	for _, tn := range hostileTenants {
		code, _, errOut := highwater(t, "export", "--source", db, "--table", "events", "--primary-key", "id",
			"--modified-at", "updated_at", "--dest", dest, "--tenant-column", "org", "--tenant", tn)
		if code != 0 {
			t.Fatalf("tenant %q: exit %d %s", tn, code, errOut)
		}
		checkTenantLake(t, db, dest, tn)
	}
}

// TestMaintenanceFansOut runs dedupe, vacuum, status and verify over the
// tenants of a config model, as export does: --parallel, --shard,
// --tenant, --json, and usage errors that exit 2.
func TestMaintenanceFansOut(t *testing.T) {
	tenants := []string{"", "a/b", "two words", "t1", "t2"}
	db := setupOrgs(t, tenants)
	root := t.TempDir()
	dest := "file://" + root + "/lake/{tenant}"
	cfg := writeConfig(t, db, dest, "    tenants_query: SELECT name FROM orgs")
	for range 2 {
		pgtest.Exec(t, db, `UPDATE events SET v = v + 1, updated_at = now() WHERE id % 3 = 0`)
		if code, out, errOut := highwater(t, "export", "--config", cfg, "--parallel", "2"); code != 0 {
			t.Fatalf("export: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	code, out, errOut := highwater(t, "verify", "--config", cfg, "--parallel", "3")
	if code != 0 || !strings.Contains(out, "summary: 5 done, 0 failed, 0 skipped") || !strings.Contains(out, `events["a/b"] events: ok`) {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
	var sums []summaryJSON
	for i := range 2 {
		code, out, errOut := highwater(t, "dedupe", "--config", cfg, "--shard", fmt.Sprintf("%d/2", i), "--json")
		if code != 0 {
			t.Fatalf("dedupe shard %d: exit %d\n%s\n%s", i, code, out, errOut)
		}
		sums = append(sums, parseSummary(t, out))
	}
	doneOnce(t, tenants, sums...)
	for _, tn := range tenants {
		if seq := checkTenantLake(t, db, dest, tn); seq != 3 {
			t.Fatalf("tenant %q at seq %d after export, export, dedupe", tn, seq)
		}
	}
	code, out, errOut = highwater(t, "status", "--config", cfg, "--tenant", "", "--tenant", "two words")
	// Each instance's name starts its table once; a note under the table
	// (an upper bound held back by a parallel run) may name it again.
	starts := func(prefix string) (n int) {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	if code != 0 || starts(`events[""] `) != 1 || starts(`events["two words"] `) != 1 || strings.Contains(out, "t1") ||
		!strings.Contains(errOut, "summary: 2 done") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = highwater(t, "vacuum", "--config", cfg, "--older-than", "1h", "--parallel", "2", "--json")
	if s := parseSummary(t, out); code != 0 || s.Done != len(tenants) {
		t.Fatalf("vacuum: exit %d %+v %s", code, s, errOut)
	}
	for _, args := range [][]string{
		{"vacuum", "--config", cfg},
		{"verify", "--dest", dest, "--model", "events", "--tenant", "t1", "--parallel", "2"},
		{"verify", "--config", cfg, "--tenant", "nobody"},
		{"verify", "--config", cfg, "--shard", "2/2"},
	} {
		if code, out, errOut := highwater(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s\n%s", args, code, out, errOut)
		}
	}
}
