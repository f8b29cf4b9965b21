package watermark

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestFormatParse(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		lit  string
	}{
		{Date, "1970-01-01"},
		{Date, "2024-02-29"},    // leap day
		{Date, "2000-02-29"},    // leap by the 400 rule
		{Date, "0001-01-01"},    // the first day AD
		{Date, "0001-12-31 BC"}, // the day before it
		{Date, "0001-02-29 BC"}, // 1 BC is a leap year (astronomical year 0)
		{Date, "4713-11-24 BC"}, // PostgreSQL's earliest date
		{Date, "10000-01-01"},   // five-digit years
		{Date, "5874897-12-31"}, // PostgreSQL's latest date
		{Date, "infinity"},
		{Date, "-infinity"},
		{Timestamp, "1970-01-01 00:00:00.000000"},
		{Timestamp, "1969-12-31 23:59:59.999999"},
		{Timestamp, "2024-02-29 12:34:56.000001"},
		{Timestamp, "0044-03-15 12:00:00.000000 BC"},
		{Timestamp, "4713-11-24 00:00:00.000000 BC"},
		{Timestamp, "10000-01-01 00:00:00.000000"},
		{Timestamp, "294246-12-31 23:59:59.999999"},
		{Timestamptz, "2026-12-01 09:00:00.123456+00"},
		{Timestamptz, "1900-02-28 23:59:59.999999+00"},
		{Timestamptz, "0001-01-01 00:00:00.000000+00 BC"},
		{Timestamptz, "infinity"},
	} {
		v, err := Parse(tc.kind, tc.lit)
		if err != nil {
			t.Errorf("Parse(%s, %q): %v", tc.kind, tc.lit, err)
			continue
		}
		if got := Format(tc.kind, v); got != tc.lit {
			t.Errorf("Format(Parse(%s, %q)) = %q", tc.kind, tc.lit, got)
		}
	}
}

// The in-memory value agrees with Go's calendar wherever Go's is defined,
// so dedupe, which compares values with Parquet's Unix-epoch timestamps,
// sees the same order.
func TestValueMatchesUnixEpoch(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2026, 12, 1, 9, 3, 33, 123456000, time.UTC),
		time.Date(1582, 10, 4, 0, 0, 0, 0, time.UTC),
		time.Date(-43, 3, 15, 12, 0, 0, 0, time.UTC),
	} {
		v, err := Parse(Timestamptz, tm.Format("2006-01-02 15:04:05.000000")+"+00")
		if tm.Year() <= 0 {
			v, err = Parse(Timestamptz, Format(Timestamptz, Value(tm.UnixMicro())))
		}
		if err != nil {
			t.Fatal(err)
		}
		if int64(v) != tm.UnixMicro() {
			t.Errorf("%v: value %d, want %d", tm, v, tm.UnixMicro())
		}
		if got, _ := v.Time(Timestamptz); !got.Equal(tm) {
			t.Errorf("%v: Time() = %v", tm, got)
		}
		d := FromTime(Date, tm)
		if want := time.Date(tm.Year(), tm.Month(), tm.Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400; int64(d) != want {
			t.Errorf("%v: day %d, want %d", tm, d, want)
		}
	}
}

// Format and Parse are exact inverses over random values of every kind.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bounds := map[Kind][2]int64{
		Date:        {-2440588, 2145031948},                     // 4713 BC .. 5874897 AD
		Timestamp:   {-210866803200000000, 9222424243200000000}, // 4713 BC .. 294246 AD
		Timestamptz: {-210866803200000000, 9222424243200000000},
	}
	for kind, b := range bounds {
		for range 20000 {
			v := Value(b[0] + int64(r.Uint64N(uint64(b[1])-uint64(b[0]))))
			lit := Format(kind, v)
			back, err := Parse(kind, lit)
			if err != nil || back != v {
				t.Fatalf("%s %d: Format %q, Parse %d, %v", kind, v, lit, back, err)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		lit  string
		want error
	}{
		{Date, "2023-02-29", ErrSyntax},
		{Date, "2024-13-01", ErrSyntax},
		{Date, "24-01-01", ErrSyntax},
		{Date, "2024-01-01 00:00:00", ErrSyntax},
		{Date, "0000-01-01 BC", ErrSyntax},
		{Timestamp, "2024-01-01", ErrSyntax},
		{Timestamp, "2024-01-01 24:00:00", ErrSyntax},
		{Timestamp, "2024-01-01 00:00:00.1234567", ErrSyntax},
		{Timestamp, "2024-01-01 00:00:00+00", ErrSyntax},
		{Timestamptz, "2024-01-01 00:00:00.000000", ErrSyntax},
		{Timestamptz, "2024-01-01 00:00:00.000000+01", ErrSyntax},
		{Timestamp, "300000-01-01 00:00:00", ErrRange},
		// Years whose day count would overflow: refused, not wrapped.
		{Date, "9000000000000000000-01-01", ErrRange},
		{Date, "100000000000000000-01-01", ErrRange},
		{Date, "25000000000000000-01-01 BC", ErrRange},
		{Date, "", ErrSyntax},
	} {
		if _, err := Parse(tc.kind, tc.lit); !errors.Is(err, tc.want) {
			t.Errorf("Parse(%s, %q) = %v, want %v", tc.kind, tc.lit, err, tc.want)
		}
	}
}

func TestParseShortFraction(t *testing.T) {
	v, err := Parse(Timestamp, "2024-01-01 00:00:00.5")
	if err != nil {
		t.Fatal(err)
	}
	if got := Format(Timestamp, v); got != "2024-01-01 00:00:00.500000" {
		t.Errorf("got %q", got)
	}
	if _, err := Parse(Timestamp, "2024-01-01 00:00:00"); err != nil {
		t.Errorf("no fraction: %v", err)
	}
}

func TestSub(t *testing.T) {
	for _, tc := range []struct {
		kind     Kind
		from     string
		lookback time.Duration
		want     string
	}{
		{Timestamptz, "2024-01-01 00:00:30.000000+00", 30 * time.Second, "2024-01-01 00:00:00.000000+00"},
		{Timestamptz, "2024-01-01 00:00:00.000000+00", 0, "2024-01-01 00:00:00.000000+00"},
		{Timestamp, "2024-03-01 00:00:00.000001", time.Microsecond, "2024-03-01 00:00:00.000000"},
		{Timestamp, "2024-03-01 00:00:00.000000", time.Microsecond, "2024-02-29 23:59:59.999999"},
		// A date moves back by every day the lookback touches.
		{Date, "2024-03-01", 0, "2024-03-01"},
		{Date, "2024-03-01", time.Second, "2024-02-29"},
		{Date, "2024-03-01", 24 * time.Hour, "2024-02-29"},
		{Date, "2024-03-01", 24*time.Hour + time.Second, "2024-02-28"},
		{Date, "1960-01-02", time.Second, "1960-01-01"},
		{Date, "5874897-12-31", 48 * time.Hour, "5874897-12-29"},
		{Date, "infinity", time.Hour, "infinity"},
		{Timestamptz, "-infinity", time.Hour, "-infinity"},
	} {
		v, err := Parse(tc.kind, tc.from)
		if err != nil {
			t.Fatal(err)
		}
		if got := Format(tc.kind, v.Sub(tc.kind, tc.lookback)); got != tc.want {
			t.Errorf("%s %q - %s = %q, want %q", tc.kind, tc.from, tc.lookback, got, tc.want)
		}
	}
}

// Sub never reaches -infinity, or wraps past it, from a finite value.
func TestSubFloor(t *testing.T) {
	for _, k := range []Kind{Date, Timestamp, Timestamptz} {
		for _, v := range []Value{NegInfinity + 1, NegInfinity + 2} {
			if got := v.Sub(k, 48*time.Hour); got != NegInfinity+1 {
				t.Errorf("%s %d - 48h = %d, want %d", k, v, got, NegInfinity+1)
			}
		}
	}
}

func TestKind(t *testing.T) {
	for _, k := range []Kind{Timestamptz, Timestamp, Date} {
		back, err := ParseKind(k.String())
		if err != nil || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), back, err)
		}
	}
	if _, err := ParseKind("time"); err == nil {
		t.Error("ParseKind(time) took it")
	}
}

func TestWidenForFallBack(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err) // the binary embeds tzdata; a test binary may not
	}
	naive := func(s string) Value {
		v, err := Parse(Timestamp, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fallBack := time.Date(2024, 11, 3, 6, 0, 0, 0, time.UTC) // 01:00 EST, the repeated hour's second reading
	for _, tc := range []struct {
		from string
		now  time.Time
		want string
	}{
		// Before the fall-back, read after it: the repeated hour is read again.
		{"2024-11-03 00:30:00.000000", fallBack.Add(45 * time.Minute), "2024-11-02 23:30:00.000000"},
		// Inside the repeated hour: taken at its first reading.
		{"2024-11-03 01:30:00.000000", fallBack.Add(time.Hour), "2024-11-03 00:30:00.000000"},
		// Both after it: nothing to widen.
		{"2024-11-03 03:00:00.000000", fallBack.Add(150 * time.Minute), "2024-11-03 03:00:00.000000"},
		// No change of offset between from and now: nothing to widen.
		{"2024-07-01 12:00:00.000000", time.Date(2024, 7, 1, 17, 0, 0, 0, time.UTC), "2024-07-01 12:00:00.000000"},
		// A spring-forward skips wall times; nothing is repeated.
		{"2024-03-10 01:30:00.000000", time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC), "2024-03-10 01:30:00.000000"},
	} {
		got := Format(Timestamp, WidenForFallBack(naive(tc.from), ny, tc.now))
		if got != tc.want {
			t.Errorf("from %s, now %v: %s, want %s", tc.from, tc.now, got, tc.want)
		}
	}
}

func TestCursorEqual(t *testing.T) {
	a, b := "2024-01-01", "2024-01-02"
	for _, tc := range []struct {
		x, y Cursor
		eq   bool
	}{
		{Cursor{&a, []string{"1"}}, Cursor{&a, []string{"1"}}, true},
		{Cursor{&a, []string{"1"}}, Cursor{&b, []string{"1"}}, false},
		{Cursor{nil, []string{"1"}}, Cursor{&a, []string{"1"}}, false},
		{Cursor{nil, []string{""}}, Cursor{nil, []string{""}}, true},
		{Cursor{&a, []string{"1", "2"}}, Cursor{&a, []string{"1"}}, false},
	} {
		if got := tc.x.Equal(&tc.y); got != tc.eq {
			t.Errorf("%v == %v: %v", tc.x, tc.y, got)
		}
	}
}
