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
	"strconv"
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
	// is in the store but its writer has not heard so (a test hook).
	Failpoint func(name string)
	probed    bool
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

func commitKey(seq int64) string { return fmt.Sprintf("%020d.json", seq) }

// NewID returns 128 random bits in hex, for commit and attempt ids.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// NewRunID returns an id that sorts by creation time.
func NewRunID(now time.Time) string {
	return now.UTC().Format("20060102T150405.000000Z") + "-" + NewID()[:8]
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

// ReadState folds the log: from the newest state checkpoint, then every
// commit after it.
func (l *Log) ReadState(ctx context.Context) (*State, error) {
	st, err := l.latestCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	for {
		c, err := l.ReadCommit(ctx, st.Seq+1)
		if errors.Is(err, objstore.ErrNotExist) {
			return st, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read state of %s: %w", l.model, err)
		}
		st.apply(c)
	}
}

type lastCheckpoint struct {
	Seq int64 `json:"seq"`
}

// latestCheckpoint loads the state checkpoint that the hint names, or the
// newest listed when the hint is missing or broken, or an empty state.
func (l *Log) latestCheckpoint(ctx context.Context) (*State, error) {
	var hint lastCheckpoint
	err := l.readJSON(ctx, l.Key("_manifests", "_last_checkpoint"), &hint)
	if err == nil {
		if st, err := l.readCheckpoint(ctx, hint.Seq); err == nil {
			return st, nil
		}
	} else if !errors.Is(err, objstore.ErrNotExist) {
		return nil, fmt.Errorf("read checkpoint hint: %w", err)
	}
	// The hint is written after the checkpoint, so a crash between the two
	// leaves a newer checkpoint than the hint says: list them.
	var newest int64 = -1
	err = l.bucket.List(ctx, l.Key("_manifests")+"/", func(a objstore.Attrs) error {
		name := path.Base(a.Key)
		if seqStr, ok := strings.CutSuffix(name, ".checkpoint.json"); ok {
			if seq, err := strconv.ParseInt(seqStr, 10, 64); err == nil && seq > newest {
				newest = seq
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list state checkpoints: %w", err)
	}
	if newest > 0 {
		return l.readCheckpoint(ctx, newest)
	}
	return &State{Version: currentVersion()}, nil
}

func (l *Log) readCheckpoint(ctx context.Context, seq int64) (*State, error) {
	var st State
	key := l.Key("_manifests", fmt.Sprintf("%020d.checkpoint.json", seq))
	if err := l.readJSON(ctx, key, &st); err != nil {
		return nil, fmt.Errorf("read state checkpoint %d: %w", seq, err)
	}
	if err := st.Version.check(fmt.Sprintf("state checkpoint %d", seq)); err != nil {
		return nil, err
	}
	return &st, nil
}

// History calls fn for every commit from seq 1 up, oldest first.
func (l *Log) History(ctx context.Context, fn func(*Commit) error) error {
	for seq := int64(1); ; seq++ {
		c, err := l.ReadCommit(ctx, seq)
		if errors.Is(err, objstore.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
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
		_ = l.writeCheckpoint(ctx, st)
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

func (l *Log) writeCheckpoint(ctx context.Context, st *State) error {
	key := l.Key("_manifests", fmt.Sprintf("%020d.checkpoint.json", st.Seq))
	err := l.bucket.Put(ctx, key, bytes.NewReader(encode(st)), objstore.PutOptions{IfNotExist: true})
	if err != nil && !errors.Is(err, objstore.ErrExist) {
		return fmt.Errorf("write state checkpoint %d: %w", st.Seq, err)
	}
	hint := l.Key("_manifests", "_last_checkpoint")
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
