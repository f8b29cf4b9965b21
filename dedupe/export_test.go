package dedupe

// WithoutPresort makes the dedupe spill the records by bucket whatever the
// layout, as it does with many buckets.
func WithoutPresort(o *Options) { o.noPresort = true }
