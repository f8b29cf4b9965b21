package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/highwater-dev/highwater/export"
	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
)

func cmdReset(env *environment) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Move a model's watermark backwards on purpose, with a reason, so the next export reads again",
		Long: `Reset moves a model's watermark back, to the watermark of an earlier commit (--to-seq) or to a value
(--watermark, a literal of the modified-at column's type, below the current watermark). It writes a
commit of kind reset holding the old and the new watermark, the --reason (required), the user, the host
and the time; status shows it. No file is removed: the next export reads from the new watermark minus
its lookback, and the rows it reads again become new versions, which dedupe orders by (modified_at,
_hw_version). An export planned before the reset cannot commit after it (it exits 4; rerun it).
With the delete log, the next export also reads the deletes of the replayed interval again, so the
reset of such a model needs its --source (or $HIGHWATER_SOURCE): it is refused, with nothing committed,
when the log was pruned past the replay's start, or records a TRUNCATE or a reinstall since the lake's
watermark, which the next export would stop at (then only export --full-refresh rebuilds the baseline).
Every check is made on the head of the log the reset commits on: when another commit lands first, the
reset is checked again on the new head, and refused there if it no longer holds.
--dry-run prints what the next export would read and commits nothing.`,
		Example: `  highwater reset --dest s3://lake/raw --model orders --to-seq 41 --reason "replay after the restore of 2026-03-02"
  highwater reset --dest file:///data/lake --model orders --watermark '2026-03-01 00:00:00+00' --reason "backdated import" --dry-run`,
	}
	fs := cmd.Flags()
	var lake lakeFlags
	lake.register(fs, "model `name`")
	var (
		toSeq  = fs.Int64("to-seq", 0, "take the watermark of commit `N`")
		value  = fs.String("watermark", "", "the new watermark `VALUE`, below the current one")
		reason = fs.String("reason", "", "why the watermark moves back (required; recorded in the log)")
		source = fs.String("source", "", "PostgreSQL `URL` of the model's source (default $HIGHWATER_SOURCE); needed for a model with the delete log, to check that the log still holds the deletes it replays")
		dryRun = fs.Bool("dry-run", false, "print what the next export would read; commit nothing")
	)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		switch {
		case *reason == "":
			return usageErr("--reason is required: it is recorded in the log for whoever reads it next")
		case (*toSeq == 0) == (*value == ""):
			return usageErr("give one of --to-seq and --watermark")
		case *toSeq < 0:
			return usageErr("--to-seq %d is negative", *toSeq)
		}
		d, err := lake.open(ctx, true)
		if err != nil {
			return err
		}
		defer d.Close()
		log := manifest.NewLog(d, lake.model)
		log.Failpoint = env.failpoint()
		src := &resetSource{url: cmp.Or(*source, env.getenv("HIGHWATER_SOURCE"))}
		defer src.close(ctx)
		rs := &resetPlanner{env: env, log: log, src: src,
			req: manifest.ResetRequest{ToSeq: *toSeq, Watermark: *value, Reason: *reason, User: currentUser(env), Host: currentHost()}}
		if *dryRun {
			st, err := log.ReadState(ctx)
			if err != nil {
				return fmt.Errorf("read the state of %s: %w", lake.model, err)
			}
			p, err := rs.plan(ctx, st)
			if err != nil {
				return resetRefused(lake.model, err)
			}
			fmt.Fprintf(env.stdout, "%s: would reset the watermark from %s to %s (dry run, nothing committed)\n", lake.model, deref(p.commit.Reset.OldWatermark), p.commit.Reset.NewWatermark)
			fmt.Fprintf(env.stdout, "  the next export would read modified-at from %s (the new watermark minus the lookback of %s) up to the source's clock\n", p.from, p.lookback)
			deleteLogNote(env, p)
			return nil
		}
		// Every check is made in the build, on the head the commit is
		// built on: a commit that lands first (an export, a dedupe, a
		// reconcile, another reset) makes Append build again on the new
		// head, where a fact checked on the old one may no longer hold.
		var p *resetPlan
		c, _, err := log.Append(ctx, func(st *manifest.State) (*manifest.Commit, error) {
			var err error
			if p, err = rs.plan(ctx, st); err != nil {
				return nil, err
			}
			return p.commit, nil
		})
		if err != nil {
			return resetRefused(lake.model, err)
		}
		if err := log.WriteSymlinkManifest(ctx, d.ObjectURL); err != nil {
			env.logger.Warn("rewrite the symlink manifest", "error", err.Error())
		}
		fmt.Fprintf(env.stdout, "%s: committed seq %d (reset): watermark %s -> %s, by %s on %s: %q\n",
			lake.model, c.Seq, deref(c.Reset.OldWatermark), c.Reset.NewWatermark, c.Reset.User, c.Reset.Host, c.Reset.Reason)
		deleteLogNote(env, p)
		return nil
	}
	return cmd
}

// resetPlan is a reset built on one state of the log and checked there:
// its commit, and where the export after it reads from.
type resetPlan struct {
	commit   *manifest.Commit
	from     string
	lookback time.Duration
}

// resetPlanner builds the reset req asks for on a state of the log.
type resetPlanner struct {
	env *environment
	log *manifest.Log
	src *resetSource
	req manifest.ResetRequest
}

// plan builds the reset on st and makes every check that depends on it:
// the new watermark below st's, a --to-seq in st's log, the modified-at
// kind (manifest's PlanReset), and, for a model whose state reads the
// delete log, that the export after the reset can re-read the replayed
// interval's deletes from where it would start (checkResetDeletes). The
// dry run and the commit both plan here, so that what the dry run prints
// is what the reset would commit on the same head. (The delete log's
// checks read the log's head again: should it be newer than st, the write
// at st.Seq+1 conflicts, and the reset is planned again on it.)
func (r *resetPlanner) plan(ctx context.Context, st *manifest.State) (*resetPlan, error) {
	c, err := r.log.PlanReset(ctx, st, r.req)
	if err != nil {
		return nil, err
	}
	from, lookback, err := nextFrom(ctx, r.log, st, *c.Watermark)
	if err != nil {
		return nil, err
	}
	if err := checkResetDeletes(ctx, r.env, r.src, r.log, st, from); err != nil {
		return nil, err
	}
	return &resetPlan{commit: c, from: from, lookback: lookback}, nil
}

// resetRefused makes a refusal of the reset a usage error (exit 2): the
// request does not hold on the log's head.
func resetRefused(model string, err error) error {
	if errors.Is(err, manifest.ErrResetRefused) {
		return usageErr("%s: %v", model, err)
	}
	return err
}

// resetSource connects to the model's source the first time a check
// needs it, and keeps the connection for the checks on a newer head.
type resetSource struct {
	url string
	src *pgsource.Source
}

func (s *resetSource) open(ctx context.Context) (*pgsource.Source, error) {
	if s.src != nil {
		return s.src, nil
	}
	src, err := pgsource.Connect(ctx, s.url)
	if err != nil {
		return nil, err
	}
	s.src = src
	return src, nil
}

func (s *resetSource) close(ctx context.Context) {
	if s.src != nil {
		s.src.Close(context.WithoutCancel(ctx))
	}
}

// checkResetDeletes refuses the reset of a model with the delete log that
// the next export would stop at (export.CheckResetDeletes): without the
// source the reset cannot tell, and a reset that commits and then leaves
// every export stopping keeps none of its promise, so the source is
// required.
func checkResetDeletes(ctx context.Context, env *environment, rs *resetSource, log *manifest.Log, st *manifest.State, from string) error {
	model := log.Model()
	if st.Identity == nil || !st.Identity.DeleteLog {
		return nil
	}
	if rs.url == "" {
		return usageErr("%s reads the delete log: give --source (or $HIGHWATER_SOURCE), so that the reset can check that the log still holds the deletes it replays", model)
	}
	src, err := rs.open(ctx)
	if err != nil {
		return err
	}
	err = export.CheckResetDeletes(ctx, src, log, model, st, from, env.logger)
	switch {
	case errors.Is(err, pgsource.ErrDeleteLogGap):
		return usageErr("%s: reset refused, the next export would stop: %v", model, err)
	case errors.Is(err, export.ErrIdentity), errors.Is(err, pgsource.ErrNoDeleteLog), errors.Is(err, pgsource.ErrBadModel):
		return usageErr("%s: reset refused: %v", model, err)
	}
	return err
}

// deleteLogNote tells, for a model with the delete log, that the next
// export re-reads the log's deletes of the replayed interval.
func deleteLogNote(env *environment, p *resetPlan) {
	if p.commit.Identity.DeleteLog {
		fmt.Fprintf(env.stdout, "  the next export also reads the delete log from %s, which still holds it\n", p.from)
	}
}

// nextFrom is where the next export would start after a reset to wm: wm
// minus the lookback of the last export's plan (or the default), or the
// committed from floor if lower. (An export of a naive timestamp column
// may widen it further across a daylight-saving fall-back, and checks the
// delete log again from there.)
func nextFrom(ctx context.Context, log *manifest.Log, st *manifest.State, wm string) (string, time.Duration, error) {
	kind, err := st.ModifiedAtKind()
	if err != nil {
		return "", 0, err
	}
	lookback := watermark.DefaultLookback
	for run, seq := range st.Runs {
		if seq != st.LastWatermarkSeq {
			continue
		}
		if p, err := log.ReadPlan(ctx, run); err == nil {
			if d, err := time.ParseDuration(p.Lookback); err == nil {
				lookback = d
			}
		}
	}
	v, err := watermark.Parse(kind, wm)
	if err != nil {
		return "", 0, err
	}
	from := v.Sub(kind, lookback)
	if st.FromFloor != nil {
		// The reset keeps the floor, which holds the next export's from at
		// or below a transaction that was still open.
		floor, err := watermark.Parse(kind, *st.FromFloor)
		if err != nil {
			return "", 0, fmt.Errorf("read the committed floor %q: %w", *st.FromFloor, err)
		}
		from = min(from, floor)
	}
	return watermark.Format(kind, from), lookback, nil
}

func currentUser(env *environment) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return cmp.Or(env.getenv("USER"), "unknown")
}

func currentHost() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
