package export

import (
	"log/slog"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

func TestWidenForFallBack(t *testing.T) {
	r := &runner{logger: slog.New(slog.DiscardHandler)}
	wall := func(s string) pgsource.Mod {
		m, err := pgsource.ParseMod(pgsource.ModTimestamp, s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	instant := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	// New York falls back on 2026-11-01 at 02:00 EDT (06:00Z) to 01:00 EST.
	for _, tc := range []struct {
		name      string
		from      string
		now       string
		widenedBy time.Duration
	}{
		{"no change of offset", "2026-10-31 12:00:00", "2026-10-31T16:30:00Z", 0},
		{"from before, now after the fall-back", "2026-11-01 00:30:00", "2026-11-01T06:45:00Z", time.Hour},
		{"from inside the repeated hour", "2026-11-01 01:30:00", "2026-11-01T06:45:00Z", time.Hour},
		{"both after it", "2026-11-01 03:00:00", "2026-11-01T08:30:00Z", 0},
		{"spring forward narrows nothing", "2026-03-08 01:30:00", "2026-03-08T07:30:00Z", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := wall(tc.from)
			got := r.widenForFallBack("America/New_York", from, instant(tc.now))
			if d := time.Duration(from-got) * time.Microsecond; d != tc.widenedBy {
				t.Fatalf("widened by %v, want %v", d, tc.widenedBy)
			}
		})
	}
}
