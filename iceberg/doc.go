// Package iceberg publishes a model as an Apache Iceberg table beside its
// data: <model>/metadata/ holds v<N>.metadata.json, version-hint.text, and
// the Avro manifests and manifest lists that iceberg-go writes.
//
// The highwater commit log stays the source of truth; the Iceberg view is
// derived from it and can be rebuilt from it at any time. Each commit of the
// log that changes the table becomes one snapshot whose summary records the
// commit's seq (highwater.seq) and the mark of the table it shows (a sum of
// the hashes of the committed files' keys, and the schema id):
//
//   - a commit that only adds files (export, backfill, a reconcile repair)
//     appends them;
//   - a commit that removes files (full refresh, dedupe) overwrites: its
//     removals and additions are one snapshot;
//   - a commit that changes no file and no schema (an export that found no
//     row, a reset, a vacuum, the opt-in itself) makes no snapshot: the
//     current one already shows its table.
//
// So a sync knows that the view is up to date when the current snapshot's
// mark is the log head's, from the state the command already holds and the
// newest metadata alone: a no-change run writes nothing to the view, and
// its check costs the same reads at any length of the log. A view that lags
// is stepped back from the head one commit at a time until the table is the
// one its snapshot shows: only the commits it lacks are read.
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
