// Package iceberg publishes a model as an Apache Iceberg table beside its
// data: <model>/metadata/ holds v<N>.metadata.json, version-hint.text, and
// the Avro manifests and manifest lists that iceberg-go writes.
//
// The highwater commit log stays the source of truth; the Iceberg view is
// derived from it and can be rebuilt from it at any time. Each commit of the
// log becomes one snapshot whose summary records the commit's seq
// (highwater.seq), so that a sync knows where the view stands:
//
//   - a commit that only adds files (export, backfill, a reconcile repair)
//     appends them;
//   - a commit that removes files (full refresh, dedupe) overwrites: its
//     removals and additions are one snapshot;
//   - a commit that changes no file (reset, vacuum, the opt-in itself) is an
//     empty snapshot, so that every seq has its snapshot.
//
// A view that does not exist yet, or was lost, starts with one snapshot of
// the whole committed set at the log's head: a snapshot of an older commit
// could name files that vacuum has since deleted.
//
// Metadata version N is written create-if-absent through objstore (the same
// precondition the log's commits rest on), so that two writers can never
// both publish version N: the loser reads the new head, sees which seqs are
// published, and goes on from there. No catalog server is needed; a catalog
// can be pointed at the newest metadata file (Register).
package iceberg
