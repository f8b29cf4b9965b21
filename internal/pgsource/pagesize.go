package pgsource

// PageSize bounds the keyset pages of a scan by rows and, when PageBytes
// is positive, by the wire size of their rows too, so that a page stays a
// short statement whatever the rows' width while narrow rows take few,
// long pages: every page boundary leaves the backend idle while the client
// drains the socket and sends the next statement.
type PageSize struct {
	// PageRows is the most rows of a page.
	PageRows int
	// PageBytes, when positive, makes a page after the first take the rows
	// that fill about PageBytes at the mean size of the rows read so far,
	// at most PageRows. The first, read before any row's size is known,
	// takes at most FirstPageRows.
	PageBytes     int64
	FirstPageRows int
	// rowsRead and bytesRead measure the rows read so far, for PageBytes.
	rowsRead, bytesRead int64
}

// Bounds of a page that its caller's most rows do not set.
const (
	// DefaultPageBytes is the wire size a page aims at after its first:
	// about a second of reading, a short statement still.
	DefaultPageBytes = 64 << 20
	// DefaultFirstPageRows bounds the first page, read before the rows'
	// width is known: the fixed page size of earlier versions.
	DefaultFirstPageRows = 50_000
)

// PagesOf is the page size of a scan of the table by the default bounds,
// with at most maxRows rows a page.
func PagesOf(maxRows int) PageSize {
	return PageSize{PageRows: maxRows, PageBytes: DefaultPageBytes, FirstPageRows: DefaultFirstPageRows}
}

// count adds one row, as the wire gave its values, to the measure.
func (p *PageSize) count(raw [][]byte) {
	p.rowsRead++
	for _, v := range raw {
		p.bytesRead += int64(len(v))
	}
}

// limit is the LIMIT of the next page; least is the fewest rows that move
// a page past its cursor.
func (p *PageSize) limit(least int) int {
	switch {
	case p.PageBytes <= 0:
		return max(least, p.PageRows)
	case p.rowsRead == 0:
		return max(least, min(p.PageRows, p.FirstPageRows))
	}
	mean := max(p.bytesRead/p.rowsRead, 1)
	return int(max(int64(least), min(int64(p.PageRows), p.PageBytes/mean)))
}
