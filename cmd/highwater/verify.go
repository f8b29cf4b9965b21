package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/manifest"
)

// cmdVerify checks a model's committed state against the store: that the
// log has no gap, that every committed file is there with the size and
// sha256 its commit recorded, and that what the log's readers follow
// (state checkpoints, the checkpoint chains of resumable runs) exists.
// Each problem is printed on a line of its own; any makes it fail.
func cmdVerify(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every committed file against its commit",
		Long: `Verify checks a model's committed state against the store: that the log has no gap, that every
committed file is there with the size and sha256 its commit recorded, and that the checkpoint chains
of unfinished runs are whole. Each problem is printed on a line of its own; any makes it exit 1.`,
		Example: `  highwater verify --dest file:///data/lake --model orders`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	asJSON := fs.Bool("json", false, "print the result as one JSON object (docs/cli.md)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		d, err := lake.open(ctx, true)
		if err != nil {
			return err
		}
		defer d.Close()
		problems, checked, err := verifyModel(ctx, d, lake.model)
		if err != nil {
			return err
		}
		if *asJSON {
			j := verifyJSON{Model: lake.model, OK: len(problems) == 0, Problems: append([]string{}, problems...)}
			if j.OK {
				j.Checked = checked
			}
			if err := writeJSON(env.stdout, j); err != nil {
				return err
			}
		}
		for _, p := range problems {
			if !*asJSON {
				fmt.Fprintf(env.stdout, "%s: %s\n", lake.model, p)
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%d problems in the committed state of %s at %s (first: %s)", len(problems), lake.model, d, problems[0])
		}
		if !*asJSON {
			fmt.Fprintf(env.stdout, "%s: ok, %s\n", lake.model, checked)
		}
		return nil
	}
	return cmd
}

// verifyModel returns the problems found, a summary of what was checked,
// and an error only when the check itself could not run.
func verifyModel(ctx context.Context, d objstore.Bucket, model string) (problems []string, checked string, err error) {
	log := manifest.NewLog(d, model)
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// The log: commits 1..n with no gap, and state checkpoints.
	var seqs []int64
	var ckpts []int64
	hint := false
	err = d.List(ctx, log.Key("_manifests")+"/", func(a objstore.Attrs) error {
		name := path.Base(a.Key)
		switch {
		case name == "_last_checkpoint":
			hint = true
		case strings.HasSuffix(name, ".checkpoint.json"):
			if n, err := strconv.ParseInt(strings.TrimSuffix(name, ".checkpoint.json"), 10, 64); err == nil {
				ckpts = append(ckpts, n)
			}
		case strings.HasSuffix(name, ".json"):
			if n, err := strconv.ParseInt(strings.TrimSuffix(name, ".json"), 10, 64); err == nil {
				seqs = append(seqs, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list the log of %s: %w", model, err)
	}
	if len(seqs) == 0 {
		return nil, "", fmt.Errorf("model %q has no commits at %s", model, d)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i, s := range seqs {
		if want := int64(i + 1); s != want {
			bad("the log has a gap: commit %d is missing before commit %d", want, s)
			break
		}
	}
	for _, s := range seqs {
		if _, err := log.ReadCommit(ctx, s); err != nil {
			bad("commit %d is unreadable: %v", s, err)
		}
	}
	for _, c := range ckpts {
		if c > seqs[len(seqs)-1] {
			bad("state checkpoint %d is past the last commit %d", c, seqs[len(seqs)-1])
		}
	}
	if hint {
		var h struct {
			Seq int64 `json:"seq"`
		}
		if b, err := objstore.ReadAll(ctx, d, log.Key("_manifests", "_last_checkpoint")); err != nil {
			bad("the checkpoint hint is unreadable: %v", err)
		} else if err := json.Unmarshal(b, &h); err != nil {
			bad("the checkpoint hint is not JSON: %v", err)
		} else if _, err := d.Stat(ctx, log.Key("_manifests", fmt.Sprintf("%020d.checkpoint.json", h.Seq))); err != nil {
			bad("the checkpoint hint names state checkpoint %d, which is missing: %v", h.Seq, err)
		}
	}
	st, err := log.ReadState(ctx)
	if err != nil {
		bad("the state cannot be read: %v", err)
		return problems, "", nil
	}
	if st.Seq != seqs[len(seqs)-1] {
		bad("the state folds to seq %d but the log ends at commit %d", st.Seq, seqs[len(seqs)-1])
	}

	// Every committed file, streamed and hashed.
	var bytes int64
	for _, f := range st.Files {
		key := log.Key(f.Key)
		a, err := d.Stat(ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			bad("committed file %s is missing", f.Key)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("stat %s: %w", f.Key, err)
		}
		if a.Size != f.Bytes {
			bad("committed file %s has %d bytes, its commit recorded %d", f.Key, a.Size, f.Bytes)
			continue
		}
		sum, n, err := hashObject(ctx, d, key)
		if err != nil {
			return nil, "", fmt.Errorf("read %s: %w", f.Key, err)
		}
		bytes += n
		if sum != f.SHA256 {
			bad("committed file %s has sha256 %s, its commit recorded %s", f.Key, sum, f.SHA256)
		}
	}

	// The checkpoint chains of runs not yet committed, which a resumed
	// export would commit: their files must exist.
	runs, err := log.ListRuns(ctx)
	if err != nil {
		return nil, "", err
	}
	chained := 0
	for _, id := range runs {
		if _, done := st.Runs[id]; done {
			continue
		}
		if _, dead := st.Abandoned[id]; dead {
			continue
		}
		chain, err := log.ReadChain(ctx, id)
		if err != nil {
			bad("the checkpoint chain of run %s is broken: %v", id, err)
			continue
		}
		for _, ck := range chain {
			chained++
			if _, err := d.Stat(ctx, log.Key(ck.File.Key)); errors.Is(err, objstore.ErrNotExist) {
				bad("checkpoint %d of unfinished run %s names %s, which is missing", ck.N, id, ck.File.Key)
			} else if err != nil {
				return nil, "", fmt.Errorf("stat %s: %w", ck.File.Key, err)
			}
		}
	}
	checked = fmt.Sprintf("%d commits, %d files (%d bytes hashed), %d checkpointed files of unfinished runs", len(seqs), len(st.Files), bytes, chained)
	return problems, checked, nil
}

func hashObject(ctx context.Context, d objstore.Bucket, key string) (string, int64, error) {
	rc, err := d.Get(ctx, key)
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
