package manifest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// ErrConflict: another writer committed the seq we meant to take.
var ErrConflict = errors.New("another writer committed first")

// ErrUnsafeStore: the store accepted a create-if-absent write over an
// existing object, so it cannot protect the log.
var ErrUnsafeStore = errors.New("the store does not honour create-if-absent writes")

// DefaultCheckpointEvery is how many commits a reader folds at most.
const DefaultCheckpointEvery = 50

// Log reads and appends one model's commit log.
type Log struct {
	bucket objstore.Bucket
	model  string
	// CheckpointEvery commits, the whole state is written next to the log.
	CheckpointEvery int64
	// Failpoint, when set, is called at "commit-response-lost": the commit
	// is in the store but its writer has not heard so, and at
	// "append-built": Append has built a commit on a head and not yet
	// written it, so a commit made there makes it build again (test hooks).
	Failpoint func(name string)
	probed    bool
	// cache is the last state ReadState folded (see cache.go).
	cache stateCache
}

// NewLog returns the log of model in bucket.
func NewLog(b objstore.Bucket, model string) *Log {
	return &Log{bucket: b, model: model, CheckpointEvery: DefaultCheckpointEvery}
}

// Bucket is the store the log lives in.
func (l *Log) Bucket() objstore.Bucket { return l.bucket }

// Model is the model's name, the first segment of all its keys.
func (l *Log) Model() string { return l.model }

// Key joins parts below the model's root.
func (l *Log) Key(parts ...string) string {
	return path.Join(append([]string{l.model}, parts...)...)
}

// NewID returns 128 random bits in hex, for commit and attempt ids.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// runIDTime is the layout of the time that starts a run id.
const runIDTime = "20060102T150405.000000Z"

// NewRunID returns an id that sorts by creation time.
func NewRunID(now time.Time) string {
	return now.UTC().Format(runIDTime) + "-" + NewID()[:8]
}

// RunIDTime reads the creation time that NewRunID put in id, by the clock
// of the machine that made it.
func RunIDTime(id string) (time.Time, bool) {
	stamp, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(runIDTime, stamp)
	return t, err == nil
}

func (l *Log) readJSON(ctx context.Context, key string, v any) error {
	data, err := objstore.ReadAll(ctx, l.bucket, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

func encode(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("encode state: %v", err)) // our own types always encode
	}
	return append(b, '\n')
}

// ReadCommit reads the commit at seq. ErrNotExist when there is none.
func (l *Log) ReadCommit(ctx context.Context, seq int64) (*Commit, error) {
	var c Commit
	if err := l.readJSON(ctx, l.Key("_manifests", commitKey(seq)), &c); err != nil {
		return nil, fmt.Errorf("read commit %d: %w", seq, err)
	}
	if err := c.Version.check(fmt.Sprintf("commit %d", seq)); err != nil {
		return nil, err
	}
	if c.Seq != seq {
		return nil, fmt.Errorf("read commit %d: it says it is seq %d", seq, c.Seq)
	}
	return &c, nil
}

// ReadState finds the head of the log (see readHead) and folds it: from
// the newest state checkpoint that proves itself (see trustedCheckpoint),
// then every commit after it. ErrGap when a commit below the head and
// above that checkpoint is missing. A second read folds only the commits
// since the first (see cache.go); the state returned is the caller's own.
func (l *Log) ReadState(ctx context.Context) (*State, error) {
	if st, ok, err := l.readCached(ctx); err != nil || ok {
		return st, err
	}
	head, st, ls, err := l.readHead(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.foldTo(ctx, st, head, nil); err != nil {
		return nil, err
	}
	l.cache.remember(ls.First, ls, st)
	return st, nil
}

// Fold folds every commit from seq 1 up to the head, trusting no
// checkpoint, and calls fn (when not nil) for each commit, oldest first.
// Vacuum, which deletes what the state does not name, and verify read the
// state this way. ErrGap when a commit below the head is missing.
func (l *Log) Fold(ctx context.Context, fn func(*Commit) error) (*State, error) {
	ls, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	head, err := ls.Head()
	if err != nil {
		return nil, err
	}
	st := &State{Version: currentVersion()}
	if err := l.foldTo(ctx, st, head, fn); err != nil {
		return nil, err
	}
	return st, nil
}

// History calls fn for every commit from seq 1 up to the head, oldest
// first. ErrGap when a commit below the head is missing.
func (l *Log) History(ctx context.Context, fn func(*Commit) error) error {
	_, err := l.Fold(ctx, fn)
	return err
}

// foldTo applies the commits after st.Seq up to head to st.
func (l *Log) foldTo(ctx context.Context, st *State, head int64, fn func(*Commit) error) error {
	for seq := st.Seq + 1; seq <= head; seq++ {
		c, err := l.ReadCommit(ctx, seq)
		if errors.Is(err, objstore.ErrNotExist) {
			// Listed a moment ago: deleted since.
			return gapError(seq, fmt.Sprintf("commit %d was listed", head))
		}
		if err != nil {
			return err
		}
		st.apply(c)
		if fn != nil {
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// lastCheckpoint is the hint to the newest state checkpoint. Readers list
// the log after the checkpoint it names, once that checkpoint proves
// itself (see readHead); a hint that lags only lengthens the listing.
type lastCheckpoint struct {
	Seq int64 `json:"seq"`
}

// trustedCheckpoint returns the newest state checkpoint in ls newer than
// base if it proves itself, and base otherwise (the empty state, or a
// checkpoint already proven), so that the caller folds the log from there.
// A checkpoint that cannot be read, or that any check doubts, costs a
// longer fold and never blocks the model; a wrong one trusted would hide
// committed files from readers and from vacuum's count of what is live.
func (l *Log) trustedCheckpoint(ctx context.Context, ls *Listing, base *State) *State {
	if n := len(ls.Checkpoints); n > 0 && ls.Checkpoints[n-1] > base.Seq {
		if st, err := l.provenCheckpoint(ctx, ls.Checkpoints[n-1]); err == nil {
			return st
		}
	}
	return base
}

// provenCheckpoint reads the state checkpoint at seq and checks it against
// the log: its seq is the one its name says, its digest matches its
// content, and the commit at seq is the one it folded up to. A checkpoint
// without a digest (written before there were digests) is not trusted.
func (l *Log) provenCheckpoint(ctx context.Context, seq int64) (*State, error) {
	ck, err := l.readCheckpoint(ctx, seq)
	if err != nil {
		return nil, err
	}
	doubt := func(why string, args ...any) error {
		return fmt.Errorf("state checkpoint %d is not trusted: %s", seq, fmt.Sprintf(why, args...))
	}
	switch {
	case ck.Digest == "":
		return nil, doubt("it has no digest")
	case stateDigest(&ck.State) != ck.Digest:
		return nil, doubt("its content does not match its digest")
	}
	c, err := l.ReadCommit(ctx, seq)
	if err != nil {
		return nil, doubt("%v", err)
	}
	if c.CommitID != ck.CommitID {
		return nil, doubt("it folded commit id %s, the commit there is %s", ck.CommitID, c.CommitID)
	}
	return &ck.State, nil
}

// readCheckpoint decodes the checkpoint at seq and checks only what any
// use of it needs: its version, and that it is the seq its name says.
func (l *Log) readCheckpoint(ctx context.Context, seq int64) (*checkpoint, error) {
	var ck checkpoint
	if err := l.readJSON(ctx, l.Key("_manifests", checkpointKey(seq)), &ck); err != nil {
		return nil, fmt.Errorf("read state checkpoint %d: %w", seq, err)
	}
	if err := ck.Version.check(fmt.Sprintf("state checkpoint %d", seq)); err != nil {
		return nil, err
	}
	if ck.Seq != seq {
		return nil, fmt.Errorf("read state checkpoint %d: it says it folds up to seq %d", seq, ck.Seq)
	}
	if err := ck.fixLayout(); err != nil {
		return nil, fmt.Errorf("read state checkpoint %d: %w", seq, err)
	}
	return &ck, nil
}

// Commit appends c at st.Seq+1 and, on success, folds it into st.
//
// The write is create-if-absent. When its outcome is unknown (the answer was
// lost, or a retry met our own earlier write), the seq is read back: our
// commit id there means we won. ErrConflict means another writer took the
// seq; the caller re-reads the state and decides whether to rebase.
func (l *Log) Commit(ctx context.Context, st *State, c *Commit) error {
	if !l.probed {
		if err := Probe(ctx, l.bucket, l.model); err != nil {
			return err
		}
		l.probed = true
	}
	if err := checkForward(st, c); err != nil {
		return err
	}
	c.Version = currentVersion()
	c.Seq = st.Seq + 1
	if c.CommitID == "" {
		c.CommitID = NewID()
	}
	c.Committed = time.Now().UTC()
	key := l.Key("_manifests", commitKey(c.Seq))
	data := encode(c)
	var putErr error
	for attempt := 0; attempt < 3; attempt++ {
		putErr = l.bucket.Put(ctx, key, bytes.NewReader(data), objstore.PutOptions{IfNotExist: true, ContentType: "application/json"})
		if putErr == nil {
			if l.Failpoint != nil {
				l.Failpoint("commit-response-lost")
			}
			break
		}
		if errors.Is(putErr, objstore.ErrPermanent) || ctx.Err() != nil {
			return fmt.Errorf("write commit %d: %w", c.Seq, putErr)
		}
		won, err := l.settle(ctx, c)
		if err == nil {
			if !won {
				return fmt.Errorf("commit %d: %w", c.Seq, ErrConflict)
			}
			putErr = nil
			break
		}
		if !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("write commit %d: %w (and reading it back: %v)", c.Seq, putErr, err)
		}
		// Nothing is there: the write did not happen, so try it again.
	}
	if putErr != nil {
		return fmt.Errorf("write commit %d: %w", c.Seq, putErr)
	}
	st.apply(c)
	if l.CheckpointEvery > 0 && c.Seq%l.CheckpointEvery == 0 {
		// The checkpoint only speeds up readers: failing to write it loses
		// nothing, the next multiple will try again.
		_ = l.writeCheckpoint(ctx, st, c.CommitID)
	}
	return nil
}

// settle reads back the seq of c after an ambiguous write.
func (l *Log) settle(ctx context.Context, c *Commit) (won bool, err error) {
	there, err := l.ReadCommit(ctx, c.Seq)
	if err != nil {
		return false, err
	}
	return there.CommitID == c.CommitID, nil
}

// writeCheckpoint writes st, folded up to the commit commitID, as a state
// checkpoint.
func (l *Log) writeCheckpoint(ctx context.Context, st *State, commitID string) error {
	ck := checkpoint{State: *st, CommitID: commitID}
	ck.Version = currentVersion()
	ck.Digest = stateDigest(&ck.State)
	key := l.Key("_manifests", checkpointKey(st.Seq))
	err := l.bucket.Put(ctx, key, bytes.NewReader(encode(&ck)), objstore.PutOptions{IfNotExist: true})
	if err != nil && !errors.Is(err, objstore.ErrExist) {
		return fmt.Errorf("write state checkpoint %d: %w", st.Seq, err)
	}
	hint := l.Key("_manifests", hintName)
	if err := l.bucket.Put(ctx, hint, bytes.NewReader(encode(lastCheckpoint{Seq: st.Seq})), objstore.PutOptions{}); err != nil {
		return fmt.Errorf("write checkpoint hint: %w", err)
	}
	return nil
}

// Probe checks that the store refuses a second create-if-absent write of
// one key. Some S3-compatible stores accept both, and on those the log
// would have no lock at all.
func Probe(ctx context.Context, b objstore.Bucket, model string) error {
	key := path.Join(model, "_manifests", "_probe-"+NewID())
	defer b.Delete(context.WithoutCancel(ctx), key)
	err := b.Put(ctx, key, strings.NewReader("1"), objstore.PutOptions{IfNotExist: true})
	if errors.Is(err, objstore.ErrExist) {
		// The key is random: a "1" there is our own write, retried after
		// its answer was lost.
		if there, rerr := objstore.ReadAll(ctx, b, key); rerr == nil && string(there) == "1" {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("probe create-if-absent: %w", err)
	}
	err = b.Put(ctx, key, strings.NewReader("2"), objstore.PutOptions{IfNotExist: true})
	switch {
	case errors.Is(err, objstore.ErrExist):
		return nil
	case err == nil:
		return fmt.Errorf("probe create-if-absent: %w: refusing to commit to it", ErrUnsafeStore)
	default:
		return fmt.Errorf("probe create-if-absent: %w", err)
	}
}
