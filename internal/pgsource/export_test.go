package pgsource

import "github.com/highwater-dev/highwater/watermark"

// PageSQL exposes pageSQL to the tests that read the server's plan of a
// page.
func (sc *Scanner) PageSQL(rng watermark.Interval, after *watermark.Cursor, nullPhase bool, limit int) (string, []any) {
	sql, args, _ := sc.pageSQL(rng, after, nullPhase, limit, false)
	return sql, args
}
