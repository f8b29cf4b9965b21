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
		req := manifest.ResetRequest{ToSeq: *toSeq, Watermark: *value, Reason: *reason, User: currentUser(env), Host: currentHost()}
		refused := func(err error) error {
			if errors.Is(err, manifest.ErrResetRefused) {
				return usageErr("%s: %v", lake.model, err)
			}
			return err
		}
		st, err := log.ReadState(ctx)
		if err != nil {
			return fmt.Errorf("read the state of %s: %w", lake.model, err)
		}
		planned, err := log.PlanReset(ctx, st, req)
		if err != nil {
			return refused(err)
		}
		from, lookback, err := nextFrom(ctx, log, st, *planned.Watermark)
		if err != nil {
			return err
		}
		if err := checkResetDeletes(ctx, env, cmp.Or(*source, env.getenv("HIGHWATER_SOURCE")), log, lake.model, st, from); err != nil {
			return err
		}
		if *dryRun {
			fmt.Fprintf(env.stdout, "%s: would reset the watermark from %s to %s (dry run, nothing committed)\n", lake.model, *st.Watermark, *planned.Watermark)
			fmt.Fprintf(env.stdout, "  the next export would read modified-at from %s (the new watermark minus the lookback of %s) up to the source's clock\n", from, lookback)
			deleteLogNote(env, planned, from)
			return nil
		}
		c, _, err := log.Reset(ctx, req)
		if err != nil {
			return refused(err)
		}
		if err := log.WriteSymlinkManifest(ctx, d.ObjectURL); err != nil {
			env.logger.Warn("rewrite the symlink manifest", "error", err.Error())
		}
		fmt.Fprintf(env.stdout, "%s: committed seq %d (reset): watermark %s -> %s, by %s on %s: %q\n",
			lake.model, c.Seq, deref(c.Reset.OldWatermark), c.Reset.NewWatermark, c.Reset.User, c.Reset.Host, c.Reset.Reason)
		if c.Reset.NewWatermark == *planned.Watermark {
			deleteLogNote(env, c, from)
		}
		return nil
	}
	return cmd
}

// checkResetDeletes refuses, before anything is committed, the reset of a
// model with the delete log that the next export would stop at
// (export.CheckResetDeletes): without the source the reset cannot tell,
// and a reset that commits and then leaves every export stopping keeps
// none of its promise, so the source is required.
func checkResetDeletes(ctx context.Context, env *environment, sourceURL string, log *manifest.Log, model string, st *manifest.State, from string) error {
	if st.Identity == nil || !st.Identity.DeleteLog {
		return nil
	}
	if sourceURL == "" {
		return usageErr("%s reads the delete log: give --source (or $HIGHWATER_SOURCE), so that the reset can check that the log still holds the deletes it replays", model)
	}
	return withSource(ctx, env, sourceURL, func(src *pgsource.Source) error {
		err := export.CheckResetDeletes(ctx, src, log, model, st, from, env.logger)
		switch {
		case errors.Is(err, pgsource.ErrDeleteLogGap):
			return usageErr("%s: reset refused, the next export would stop: %v", model, err)
		case errors.Is(err, export.ErrIdentity), errors.Is(err, pgsource.ErrNoDeleteLog), errors.Is(err, pgsource.ErrBadModel):
			return usageErr("%s: reset refused: %v", model, err)
		}
		return err
	})
}

// deleteLogNote tells, for a model with the delete log, that the next
// export re-reads the log's deletes of the replayed interval.
func deleteLogNote(env *environment, c *manifest.Commit, from string) {
	if c.Identity.DeleteLog {
		fmt.Fprintf(env.stdout, "  the next export also reads the delete log from %s, which still holds it\n", from)
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
