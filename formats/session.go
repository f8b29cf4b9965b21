package formats

// SessionSettings returns the settings the exporter should SET on its source
// session. Binary values do not depend on them, but the text forms that
// SelectExprs asks for do: a composite or range holding a timestamptz, an
// interval, a float or a bytea prints differently under other settings, and
// files written under different settings would disagree on the same value.
// lc_monetary decides money's scale; it is left to the database's own value.
func SessionSettings() map[string]string {
	return map[string]string{
		"TimeZone":           "UTC",
		"DateStyle":          "ISO, YMD",
		"IntervalStyle":      "iso_8601",
		"extra_float_digits": "3",
		"bytea_output":       "hex",
	}
}
