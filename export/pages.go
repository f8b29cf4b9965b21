package export

// pageCount hands the pages a read stage runs to its batches. Each batch
// carries, in its metrics, the pages that began with one of its rows, so
// that the checkpoint of a file counts the pages of what it holds and no
// more: a resumed attempt starts from that checkpoint's metrics, reads
// the rows after the file again and counts the pages it runs for them,
// and no page is counted twice or lost. The pages no row began (the last,
// empty one) are the run's own, added at its end.
//
// It is used on the read stage's goroutine, where the reader's page count
// lives; the write stage sees the pages only through the batches.
type pageCount struct {
	counted int64 // the pages the batches carry
}

// carry adds to b the pages run since the last batch it carried some,
// given the reader's count so far.
func (c *pageCount) carry(b *batch, pages int64) {
	b.metrics.Pages += pages - c.counted
	c.counted = pages
}

// rest is the pages no batch carries, given the reader's final count.
func (c *pageCount) rest(pages int64) int64 { return pages - c.counted }
