package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/pgtest"
	"github.com/highwater-dev/highwater/manifest"
)

// TestIndexAdviceOncePerModel: two models fanned out over four tenants of
// a table without the tenant index, run four at a time: the advice to
// create the index is said once per model, saying it holds for every
// tenant, and every tenant's commit records it.
func TestIndexAdviceOncePerModel(t *testing.T) {
	tenants := []string{"a", "b", "c", "d"}
	db := setupOrgs(t, tenants)
	pgtest.Exec(t, db, `DROP INDEX events_org_updated_at_id_idx`)
	dest := "file://" + t.TempDir() + "/lake/{tenant}"
	cfg := writeConfig(t, db, dest, `    tenants: [a, b, c, d]
  - name: events_copy
    table: public.events
    primary_key: id
    modified_at: updated_at
    tenant_column: org
    tenants: [a, b, c, d]`)
	const advice = `no index on public.events leads with ("org", "updated_at")`
	for round := range 2 {
		code, out, errOut := highwater(t, "export", "--config", cfg, "--parallel", "4")
		if code != 0 {
			t.Fatalf("round %d: exit %d\n%s\n%s", round, code, out, errOut)
		}
		// Not on a terminal, the log is JSON, a record a line.
		saidFor := map[string]int{}
		var said []string
		for line := range strings.Lines(errOut) {
			var rec struct{ Level, Msg, Model string }
			if json.Unmarshal([]byte(line), &rec) != nil || !strings.Contains(rec.Msg, advice) {
				continue
			}
			saidFor[rec.Model]++
			if rec.Level != "WARN" || !strings.Contains(rec.Msg, "once for every tenant of the model") || !strings.Contains(rec.Msg, `create one on ("org", "updated_at", "id")`) {
				said = append(said, line)
			}
		}
		if len(saidFor) != 2 || saidFor["events"] != 1 || saidFor["events_copy"] != 1 {
			t.Fatalf("round %d: the advice was said %v times by model, want once each:\n%s", round, saidFor, errOut)
		}
		if len(said) > 0 {
			t.Fatalf("round %d: the advice does not warn that it holds for every tenant, or which index: %s", round, said)
		}
		for _, model := range []string{"events", "events_copy"} {
			for _, tn := range tenants {
				d, err := destination.OpenTenant(t.Context(), dest, &tn)
				if err != nil {
					t.Fatal(err)
				}
				log := manifest.NewLog(d, model)
				head, err := log.Head(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				c, err := log.ReadCommit(t.Context(), head)
				d.Close()
				if err != nil || head != int64(round+1) || !strings.Contains(strings.Join(c.Warnings, "\n"), advice) {
					t.Fatalf("round %d: %s[%q] commit %d records %q (%v)", round, model, tn, head, c.Warnings, err)
				}
			}
		}
	}
}
