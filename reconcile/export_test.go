package reconcile

// SetJudging makes a reconcile judge judges partitions at once, each in a
// share of share bytes. The number of partitions stays what the budget
// makes it, so a small share makes partitions split again.
func (o *Options) SetJudging(judges int, share int64) { o.judges, o.share = judges, share }
