package manifest

import (
	"testing"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/watermark"
)

// The modified-at kind is compared only where both sides record it, so a
// log written before it was recorded keeps working and is completed; a
// kind that changed is the same model, continued only by a full refresh.
func TestIdentityModifiedAtKind(t *testing.T) {
	base := Identity{SystemID: "1", Database: "db", Relation: "public.items", RelationOID: 7, PrimaryKey: []string{"id"}, ModifiedAt: "updated_at"}
	withTZ := func(kind, tz string) Identity { id := base; id.ModifiedAtKind, id.TimeZone = kind, tz; return id }
	with := func(kind string) Identity { return withTZ(kind, "") }
	for _, tc := range []struct {
		name            string
		old, run        Identity
		same, sameModel bool
		completes       bool
	}{
		{"both record it", with("timestamptz"), with("timestamptz"), true, true, false},
		{"an old log lacks it", with(""), with("timestamptz"), true, true, true},
		{"the run lacks it", with("date"), with(""), true, true, false},
		{"the column changed type", with("timestamp"), with("timestamptz"), false, true, false},
		{"a time zone alone changed", withTZ("date", "UTC"), withTZ("date", "Europe/Paris"), false, false, false},
		{"the type changed and took a time zone", withTZ("timestamptz", ""), withTZ("date", "UTC"), false, true, false},
		{"an old log's time zone changed", withTZ("", "UTC"), withTZ("date", "Europe/Paris"), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := tc.old.Diff(tc.run); (d == "") != tc.same {
				t.Errorf("Diff = %q, want same %v", d, tc.same)
			}
			if got := tc.old.SameModel(tc.run); got != tc.sameModel {
				t.Errorf("SameModel = %v", got)
			}
			if got := tc.old.Completes(tc.run); got != tc.completes {
				t.Errorf("Completes = %v", got)
			}
		})
	}
	// A log lacking both the OID and the kind is completed by a run with both.
	old := with("")
	old.RelationOID = 0
	if !old.Completes(with("date")) {
		t.Error("an identity lacking OID and kind is not completed")
	}
	if old.Completes(old) {
		t.Error("an identity completes itself")
	}
}

// The committed kind is the identity's, else the one the schema's Parquet
// type says (logs written before the identity recorded it).
func TestStateModifiedAtKind(t *testing.T) {
	schema := func(logical string) *Schema {
		return &Schema{Fields: []formats.Field{{Name: "id", Physical: "INT64"}, {Name: "updated_at", Physical: "INT64", Logical: logical}}}
	}
	for _, tc := range []struct {
		kind   string
		schema *Schema
		want   watermark.Kind
		ok     bool
	}{
		{"date", schema("TIMESTAMP(MICROS,true)"), watermark.Date, true}, // the identity wins
		{"", schema("DATE"), watermark.Date, true},
		{"", schema("TIMESTAMP(MICROS,false)"), watermark.Timestamp, true},
		{"", schema("TIMESTAMP(MICROS,true)"), watermark.Timestamptz, true},
		{"", schema("STRING"), 0, false},
		{"", nil, 0, false},
		{"time", nil, 0, false},
	} {
		st := &State{Identity: &Identity{ModifiedAt: "updated_at", ModifiedAtKind: tc.kind}, Schema: tc.schema}
		got, err := st.ModifiedAtKind()
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("kind %q, schema %v: %v, %v; want %v, ok %v", tc.kind, tc.schema, got, err, tc.want, tc.ok)
		}
	}
}
