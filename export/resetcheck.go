package export

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/highwater-dev/highwater/internal/pgsource"
	"github.com/highwater-dev/highwater/manifest"
)

// CheckResetDeletes says, before a reset of the model whose committed
// state is st is written, whether the export after it can keep the
// reset's promise for deletes: a model that reads the delete log reads its
// entries from from (the new watermark less the lookback) again, so the
// log must still hold them, and no TRUNCATE or reinstall may have broken
// it since the lake's watermark. It makes the checks that export makes
// (pgsource.DeleteLog.Check), on src, which must be the model's source, so
// that a reset the next export would refuse is refused itself, with
// nothing committed. A model without the delete log passes.
//
// The errors it classifies: ErrIdentity when src or its table is not the
// model's, pgsource.ErrNoDeleteLog and pgsource.ErrBadModel when the log
// is not installed as the model needs, pgsource.ErrDeleteLogGap when it
// cannot vouch for the replay.
func CheckResetDeletes(ctx context.Context, src *pgsource.Source, log *manifest.Log, model string, st *manifest.State, from string, logger *slog.Logger) error {
	id := st.Identity
	if id == nil || !id.DeleteLog {
		return nil
	}
	if src.SystemID != id.SystemID || src.Database != id.Database {
		return fmt.Errorf("%w: the source is system %s, database %q, but %s holds the state of system %s, database %q: give the model's --source",
			ErrIdentity, src.SystemID, src.Database, model, id.SystemID, id.Database)
	}
	t, err := src.Discover(ctx, pgsource.Spec{Table: id.Relation, PrimaryKey: id.PrimaryKey, ModifiedAt: id.ModifiedAt,
		TenantColumn: id.TenantColumn, Tenant: id.Tenant, SoftDelete: id.SoftDelete})
	if err != nil {
		return err
	}
	if id.RelationOID != 0 && t.RelOID != id.RelationOID {
		return fmt.Errorf("%w: %s of the source has OID %d, but %s holds the state of OID %d: the table was dropped and recreated or restored from a dump, so only export --full-refresh rebuilds the baseline",
			ErrIdentity, t.Relation, t.RelOID, model, id.RelationOID)
	}
	if id.ModifiedAtKind != "" && t.ModKind.String() != id.ModifiedAtKind {
		return fmt.Errorf("%w: %s.%s is of kind %s, but %s holds the state of kind %s: only export --full-refresh rebuilds the baseline",
			ErrIdentity, t.Relation, t.ModifiedAt, t.ModKind, model, id.ModifiedAtKind)
	}
	dl, err := src.OpenDeleteLog(ctx, t, cmp.Or(id.TimeZone, src.TimeZone))
	if err != nil {
		return err
	}
	since, sinceAt, err := deleteLogSince(ctx, log, model, t.ModKind, st.Watermark, logger)
	if err != nil {
		return err
	}
	return dl.Check(ctx, &from, since, sinceAt)
}
