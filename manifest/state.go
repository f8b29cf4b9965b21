package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/highwater-dev/highwater/watermark"
)

// State is the fold of a model's commit log up to Seq.
type State struct {
	Version
	Seq int64 `json:"seq"` // 0: empty log
	// Identity is nil until the first commit; then it is the identity of
	// the first commit, or of the newest that adopted one.
	Identity *Identity `json:"identity,omitempty"`
	// Watermark is the exclusive upper bound of what has been exported.
	Watermark *string `json:"watermark"`
	FromFloor *string `json:"from_floor,omitempty"`
	// LastWatermarkSeq is the newest commit that moved the watermark.
	LastWatermarkSeq int64 `json:"last_watermark_seq"`
	// Files is the committed set in the order the files were added.
	Files  []File  `json:"files"`
	Schema *Schema `json:"schema,omitempty"`
	// SchemaHistory records at which seq each schema id first appeared.
	SchemaHistory []SchemaChange `json:"schema_history,omitempty"`
	// Runs maps the committed runs to their commits' seqs: every one
	// until a vacuum forgets it (Commit.Forgotten), which it does once it
	// has deleted the run's plan and checkpoints, so that the map does not
	// grow with every run forever. It is a shortcut for those who list
	// runs (Ended); Live needs no entry to refuse an attempt of a
	// committed run: its commit moved the watermark past the attempt's
	// base, or lies after that base, where Live finds it.
	Runs map[string]int64 `json:"runs,omitempty"`
	// Abandoned holds the runs a vacuum declared dead.
	Abandoned map[string]int64 `json:"abandoned,omitempty"`
	// Removed maps files taken out of the committed set to the seq and time
	// of their removal, for vacuum's retention.
	Removed map[string]Removal `json:"removed,omitempty"`
	// Layout is the dedupe layout as its commit recorded it, a JSON object.
	// Checkpoints before it was one held it base64-encoded (see fixLayout).
	Layout json.RawMessage `json:"layout,omitempty"`
	// TableFormats are the formats the newest commit that set them named.
	TableFormats []string `json:"table_formats,omitempty"`
}

// Publishes reports whether the model is also published in table format f.
func (s *State) Publishes(f string) bool { return slices.Contains(s.TableFormats, f) }

// ModifiedAtKind is the kind of the committed modified-at column: the
// identity's, or, in a log written before the identity recorded it, the
// one its Parquet type says.
func (st *State) ModifiedAtKind() (watermark.Kind, error) {
	if st.Identity == nil {
		return 0, errors.New("the log has no commits")
	}
	if k := st.Identity.ModifiedAtKind; k != "" {
		return watermark.ParseKind(k)
	}
	if st.Schema != nil {
		for _, f := range st.Schema.Fields {
			if f.Name != st.Identity.ModifiedAt {
				continue
			}
			switch f.Logical {
			case "DATE":
				return watermark.Date, nil
			case "TIMESTAMP(MICROS,false)":
				return watermark.Timestamp, nil
			case "TIMESTAMP(MICROS,true)":
				return watermark.Timestamptz, nil
			}
			return 0, fmt.Errorf("modified-at column %q is written as %s %s, not as a timestamp or date", f.Name, f.Physical, f.Logical)
		}
	}
	return 0, fmt.Errorf("the committed schema has no modified-at column %q", st.Identity.ModifiedAt)
}

// SchemaChange is one step of a model's schema history.
type SchemaChange struct {
	Seq      int64  `json:"seq"`
	SchemaID string `json:"schema_id"`
}

// Removal says when a file left the committed set.
type Removal struct {
	Seq       int64 `json:"seq"`
	Committed int64 `json:"committed_unix"`
}

// apply folds one commit into the state. The commit must be at Seq+1.
func (s *State) apply(c *Commit) {
	s.Seq = c.Seq
	if s.Identity == nil || c.AdoptsIdentity {
		id := c.Identity
		s.Identity = &id
	}
	if MovesWatermark(c.Kind) {
		s.LastWatermarkSeq = c.Seq
	}
	if c.Watermark != nil {
		s.Watermark = c.Watermark
	}
	s.FromFloor = c.FromFloor
	if len(c.Removed) > 0 {
		gone := make(map[string]bool, len(c.Removed))
		for _, k := range c.Removed {
			gone[k] = true
			if s.Removed == nil {
				s.Removed = make(map[string]Removal)
			}
			s.Removed[k] = Removal{Seq: c.Seq, Committed: c.Committed.Unix()}
		}
		s.Files = slices.DeleteFunc(s.Files, func(f File) bool { return gone[f.Key] })
	}
	s.Files = append(s.Files, c.Added...)
	if c.Schema != nil && (s.Schema == nil || s.Schema.ID != c.Schema.ID) {
		s.Schema = c.Schema
		s.SchemaHistory = append(s.SchemaHistory, SchemaChange{Seq: c.Seq, SchemaID: c.Schema.ID})
	}
	if c.RunID != "" {
		if s.Runs == nil {
			s.Runs = make(map[string]int64)
		}
		s.Runs[c.RunID] = c.Seq
	}
	for _, r := range c.Forgotten {
		delete(s.Runs, r)
	}
	for _, r := range c.Abandoned {
		if s.Abandoned == nil {
			s.Abandoned = make(map[string]int64)
		}
		s.Abandoned[r] = c.Seq
	}
	if len(c.Layout) > 0 {
		s.Layout = c.Layout
	}
	if c.TableFormats != nil {
		s.TableFormats = c.TableFormats
	}
}

// FileSet returns the committed files keyed by key.
func (s *State) FileSet() map[string]File {
	m := make(map[string]File, len(s.Files))
	for _, f := range s.Files {
		m[f.Key] = f
	}
	return m
}

// checkpoint is the document of a state checkpoint: the state folded up to
// Seq, and what lets a reader trust it without folding the log again.
type checkpoint struct {
	State
	// CommitID is the id of the commit at Seq: a checkpoint left from
	// another history of the model (a log deleted and written anew) names
	// another commit than the one there now.
	CommitID string `json:"commit_id,omitempty"`
	// Digest is stateDigest of State: an edited or damaged checkpoint no
	// longer matches it. Checkpoints written before it existed have none,
	// and readers fold the log instead of trusting them.
	Digest string `json:"state_sha256,omitempty"`
}

// stateDigest hashes the canonical form of a state, the same however the
// state was reached: from commit 1, or from a checkpoint and the commits
// after it. The version header says how it was written, not what it holds,
// and an empty file list is no list.
func stateDigest(s *State) string {
	c := *s
	c.Version = Version{}
	if len(c.Files) == 0 {
		c.Files = nil
	}
	// Marshal compacts the layout, which a commit read from the store holds
	// indented and a fresh one compact.
	b, err := json.Marshal(&c)
	if err != nil {
		panic(fmt.Sprintf("encode state: %v", err)) // our own types always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fixLayout turns the base64 string that checkpoints used to hold into the
// JSON object that commits hold.
func (s *State) fixLayout() error {
	if len(s.Layout) == 0 || s.Layout[0] != '"' {
		return nil
	}
	var old []byte
	if err := json.Unmarshal(s.Layout, &old); err != nil {
		return fmt.Errorf("decode the base64 layout: %w", err)
	}
	if !json.Valid(old) {
		return fmt.Errorf("decode the base64 layout: it holds no JSON")
	}
	s.Layout = old
	return nil
}
