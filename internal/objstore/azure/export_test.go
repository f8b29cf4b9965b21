package azure

// Classify exposes the error mapping to the tests, which reach errors the
// backend's own requests never provoke.
func (b *Bucket) Classify(err error) error { return b.classify(err, false) }
