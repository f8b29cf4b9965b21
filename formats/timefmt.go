package formats

import "strconv"

// The text forms below are built from the binary values rather than by
// casting to text in SQL, so that they do not depend on the session's
// DateStyle or IntervalStyle. They match PostgreSQL's own output (time_out,
// timetz_out, and interval_out with IntervalStyle iso_8601), which the tests
// check against the server.

func append2(b []byte, v int64) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

// appendFraction appends ".ffffff" without trailing zeros, or nothing.
func appendFraction(b []byte, us int64) []byte {
	if us == 0 {
		return b
	}
	var d [6]byte
	for i := 5; i >= 0; i-- {
		d[i] = byte('0' + us%10)
		us /= 10
	}
	n := 6
	for n > 0 && d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

// appendTime formats µs since midnight as HH:MM:SS[.ffffff]; 24:00:00 is a
// valid PostgreSQL time and is kept.
func appendTime(b []byte, us int64) []byte {
	h := us / 3600000000
	us -= h * 3600000000
	m := us / 60000000
	us -= m * 60000000
	s := us / 1000000
	us -= s * 1000000
	b = append2(b, h)
	b = append(b, ':')
	b = append2(b, m)
	b = append(b, ':')
	b = append2(b, s)
	return appendFraction(b, us)
}

// appendZone formats a timetz zone, given in seconds west of UTC, as
// +HH, +HH:MM or +HH:MM:SS like PostgreSQL.
func appendZone(b []byte, west int32) []byte {
	tz := -int64(west)
	sign := byte('+')
	if tz < 0 {
		sign, tz = '-', -tz
	}
	b = append(b, sign)
	b = append2(b, tz/3600)
	mi, s := (tz/60)%60, tz%60
	if mi != 0 || s != 0 {
		b = append(b, ':')
		b = append2(b, mi)
	}
	if s != 0 {
		b = append(b, ':')
		b = append2(b, s)
	}
	return b
}

func appendISOPart(b []byte, v int64, unit byte) []byte {
	if v == 0 {
		return b
	}
	b = strconv.AppendInt(b, v, 10)
	return append(b, unit)
}

// appendISOInterval formats an interval as ISO 8601 with PostgreSQL's sign
// conventions (each part carries its own sign, e.g. P1Y-2M3DT-4H). Parquet's
// INTERVAL type cannot hold µs and no engine we target reads it, and the ISO
// form, unlike the PostgreSQL one, is parsed by most languages.
func appendISOInterval(b []byte, us int64, days, months int32) []byte {
	year, mon := int64(months)/12, int64(months)%12
	h := us / 3600000000
	us -= h * 3600000000
	mi := us / 60000000
	us -= mi * 60000000
	sec := us / 1000000
	fsec := us - sec*1000000
	if year == 0 && mon == 0 && days == 0 && h == 0 && mi == 0 && sec == 0 && fsec == 0 {
		return append(b, "PT0S"...)
	}
	b = append(b, 'P')
	b = appendISOPart(b, year, 'Y')
	b = appendISOPart(b, mon, 'M')
	b = appendISOPart(b, int64(days), 'D')
	if h != 0 || mi != 0 || sec != 0 || fsec != 0 {
		b = append(b, 'T')
	}
	b = appendISOPart(b, h, 'H')
	b = appendISOPart(b, mi, 'M')
	if sec != 0 || fsec != 0 {
		if sec < 0 || fsec < 0 {
			b = append(b, '-')
		}
		if sec < 0 {
			sec = -sec
		}
		if fsec < 0 {
			fsec = -fsec
		}
		b = strconv.AppendInt(b, sec, 10)
		b = appendFraction(b, fsec)
		b = append(b, 'S')
	}
	return b
}
