// Package dedupe compacts a model's committed set into one row per primary
// key. The inputs it removes stay in the store until a vacuum (package
// vacuum) deletes them.
//
// A dedupe keeps, per key, the version with the greatest
// (modified_at, _hw_version). Its output is laid out copy-on-write in
// key-hash buckets recorded in the log: each bucket holds one file set
// sorted by key, so that the next dedupe rewrites only the buckets that new
// export files touch. Memory stays under a limit whatever the input size:
// rows are partitioned into per-bucket spill files on local disk, sorted in
// runs that fit, and merged.
//
// One commit removes every input and adds every output; the watermark does
// not move. A dedupe rebases over commits that only added files and starts
// over when anything removed files meanwhile, so rows are never lost nor
// doubled.
package dedupe
