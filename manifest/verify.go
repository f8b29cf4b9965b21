package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Verify checks the model's committed state against the store: that the
// log has no gap and every commit reads, that every state checkpoint agrees
// with the fold of the commits it stands for, that every committed file is
// there with the size and sha256 its commit recorded, and that what the
// log's readers follow (the checkpoint hint, the checkpoint chains of
// unfinished runs) exists. It folds the log from commit 1 and trusts no
// checkpoint. Below a gap it still checks what it can: the commits listed,
// and the state and files up to the gap.
//
// It returns the problems found, a summary of what was checked, and an
// error only when the check itself could not run.
func (l *Log) Verify(ctx context.Context) (problems []string, checked string, err error) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ls, err := l.List(ctx)
	if err != nil {
		return nil, "", err
	}
	if len(ls.Commits) == 0 && len(ls.Checkpoints) == 0 {
		return nil, "", fmt.Errorf("model %q has no commits at %v", l.model, l.bucket)
	}
	upTo := int64(len(ls.Commits))
	if missing, evidence := ls.Gap(); missing > 0 {
		bad("the log has a gap: commit %d is missing, yet %s; every command but verify refuses the model", missing, evidence)
		upTo = missing - 1
	}

	st, compared, err := l.verifyFold(ctx, ls, upTo, bad)
	if err != nil {
		return nil, "", err
	}
	if st.Seq == int64(len(ls.Commits)) {
		// No gap: what readers read must be the log's own fold.
		if rs, err := l.ReadState(ctx); err != nil {
			bad("the state cannot be read: %v", err)
		} else if stateDigest(rs) != stateDigest(st) {
			bad("readers read another state than the fold of the log: %s", describeDiff(rs, st))
		}
	}
	if ls.Hint {
		var h lastCheckpoint
		if err := l.readJSON(ctx, l.Key("_manifests", hintName), &h); err != nil {
			bad("the checkpoint hint is unreadable: %v", err)
		} else if _, err := l.bucket.Stat(ctx, l.Key("_manifests", checkpointKey(h.Seq))); err != nil {
			bad("the checkpoint hint names state checkpoint %d, which is missing: %v", h.Seq, err)
		}
	}

	hashed, err := l.verifyFiles(ctx, st, bad)
	if err != nil {
		return nil, "", err
	}
	chained, err := l.verifyChains(ctx, st, bad)
	if err != nil {
		return nil, "", err
	}
	checked = fmt.Sprintf("%d commits, %d files (%d bytes hashed), %d state checkpoints agree with the log, %d checkpointed files of unfinished runs",
		len(ls.Commits), len(st.Files), hashed, compared, chained)
	if st.Seq < int64(len(ls.Commits)) {
		checked += fmt.Sprintf("; state and files checked up to commit %d only", st.Seq)
	}
	return problems, checked, nil
}

// verifyFold reads every listed commit and folds commits 1..upTo,
// comparing each state checkpoint on the way with the fold at its seq. The
// fold stops early at a commit that cannot be read.
func (l *Log) verifyFold(ctx context.Context, ls *Listing, upTo int64, bad func(string, ...any)) (st *State, compared int, err error) {
	isCheckpoint := make(map[int64]bool, len(ls.Checkpoints))
	for _, seq := range ls.Checkpoints {
		isCheckpoint[seq] = true
	}
	st = &State{Version: currentVersion()}
	folding := true
	for _, seq := range ls.Commits {
		c, err := l.ReadCommit(ctx, seq)
		if err != nil {
			bad("commit %d is unreadable: %v", seq, err)
			folding = false
			continue
		}
		if !folding || seq > upTo {
			continue
		}
		st.apply(c)
		if !isCheckpoint[seq] {
			continue
		}
		if l.verifyCheckpoint(ctx, st, c, bad) {
			compared++
		}
	}
	return st, compared, nil
}

// verifyCheckpoint compares the state checkpoint at c.Seq with st, the
// fold of the log up to c.
func (l *Log) verifyCheckpoint(ctx context.Context, st *State, c *Commit, bad func(string, ...any)) bool {
	ck, err := l.readCheckpoint(ctx, c.Seq)
	switch {
	case err != nil:
		bad("state checkpoint %d is unreadable (readers fold the log instead): %v", c.Seq, err)
	case stateDigest(&ck.State) != stateDigest(st):
		bad("state checkpoint %d disagrees with the log: %s", c.Seq, describeDiff(&ck.State, st))
	case ck.Digest != "" && ck.Digest != stateDigest(st):
		bad("state checkpoint %d does not match its own digest", c.Seq)
	case ck.CommitID != "" && ck.CommitID != c.CommitID:
		bad("state checkpoint %d folded commit id %s, the commit there is %s", c.Seq, ck.CommitID, c.CommitID)
	default:
		return true
	}
	return false
}

// describeDiff says how got differs from want, the log's fold.
func describeDiff(got, want *State) string {
	have, fold := got.FileSet(), want.FileSet()
	for _, f := range want.Files {
		if _, ok := have[f.Key]; !ok {
			return fmt.Sprintf("it lacks committed file %s (%d files, the log commits %d)", f.Key, len(got.Files), len(want.Files))
		}
	}
	for _, f := range got.Files {
		if _, ok := fold[f.Key]; !ok {
			return fmt.Sprintf("it names file %s, which the log does not commit", f.Key)
		}
	}
	str := func(p *string) string {
		if p == nil {
			return "(none)"
		}
		return *p
	}
	if str(got.Watermark) != str(want.Watermark) {
		return fmt.Sprintf("its watermark is %s, the log's %s", str(got.Watermark), str(want.Watermark))
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("its content differs from the fold of commits 1 to %d at %q", want.Seq, excerpt(g, i))
		}
	}
	return fmt.Sprintf("its content differs from the fold of commits 1 to %d", want.Seq)
}

func excerpt(b []byte, i int) string { return string(b[max(0, i-30):min(len(b), i+30)]) }

// verifyFiles streams and hashes every file of st.
func (l *Log) verifyFiles(ctx context.Context, st *State, bad func(string, ...any)) (hashed int64, err error) {
	for _, f := range st.Files {
		key := l.Key(f.Key)
		a, err := l.bucket.Stat(ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			bad("committed file %s is missing", f.Key)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("stat %s: %w", f.Key, err)
		}
		if a.Size != f.Bytes {
			bad("committed file %s has %d bytes, its commit recorded %d", f.Key, a.Size, f.Bytes)
			continue
		}
		sum, n, err := hashObject(ctx, l.bucket, key)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", f.Key, err)
		}
		hashed += n
		if sum != f.SHA256 {
			bad("committed file %s has sha256 %s, its commit recorded %s", f.Key, sum, f.SHA256)
		}
	}
	return hashed, nil
}

// verifyChains checks the checkpoint chains of runs not yet committed,
// which a resumed export would commit: their files must exist.
func (l *Log) verifyChains(ctx context.Context, st *State, bad func(string, ...any)) (chained int, err error) {
	runs, err := l.ListRuns(ctx)
	if err != nil {
		return 0, err
	}
	for _, id := range runs {
		if st.Ended(id) != nil {
			continue
		}
		chain, err := l.ReadChain(ctx, id)
		if err != nil {
			bad("the checkpoint chain of run %s is broken: %v", id, err)
			continue
		}
		for _, ck := range chain {
			chained++
			if _, err := l.bucket.Stat(ctx, l.Key(ck.File.Key)); errors.Is(err, objstore.ErrNotExist) {
				bad("checkpoint %d of unfinished run %s names %s, which is missing", ck.N, id, ck.File.Key)
			} else if err != nil {
				return 0, fmt.Errorf("stat %s: %w", ck.File.Key, err)
			}
		}
	}
	return chained, nil
}

func hashObject(ctx context.Context, b objstore.Bucket, key string) (string, int64, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
