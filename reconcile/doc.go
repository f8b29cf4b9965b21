// Package reconcile proves a model's lake against its source: it compares
// every key of the source with the lake's committed set, read by dedupe's
// rule (the newest (modified_at, _hw_version) version of each key; a
// winning tombstone removes the key), and counts the keys that are
// missing from the lake, extra in it, changed, or matched. With a repair
// it writes, in the same commit, new versions of the missing and changed
// rows and tombstones of the extra keys.
//
// Both sides are reduced to one small record per row (the key, the
// modified-at, the version and a hash of the values) and spilled to local
// disk in key-hash partitions, so memory stays bounded whatever the size:
// a partition is compared in memory, and one too large for the budget is
// split again. Partitions hold disjoint keys, so several are judged at
// once, one per CPU as far as the budget holds (memory.go says how the
// memory limit is divided).
//
// The values are hashed as the lake holds them. The source's rows are read
// with the export's own select expressions and converted by the export's
// own mapping (formats.Mapping) into the Parquet values a file would hold,
// and those are hashed; the lake's rows are read from the files and hashed
// the same way. (A source value whose Parquet value is its wire bytes
// unchanged, as the mapping says, is hashed from those bytes without the
// conversion: the same bytes, at less cost; wire.go.) So both sides produce the same canonical form for every
// type by construction (numeric, timestamps, float NaN and ±0, bytea,
// arrays, json, uuid, NULLs), and the rule for what a value becomes in the
// lake keeps one home: the mapping. What the mapping folds together (a
// timestamp's 'infinity' and 9999-12-31 23:59:59.999999) reconcile cannot
// tell apart either; what it keeps apart (a float's -0 and 0), reconcile
// does too.
package reconcile
