package pgsource

import (
	"context"
	"fmt"
	"github.com/highwater-dev/highwater/watermark"
	"strings"
	"time"
)

// Bound is the upper end of a run's interval, computed by the server in the
// column's own type before extraction starts.
type Bound struct {
	// To is the exclusive upper end of what the run reads: a literal of the
	// modified-at type. For a date column it is the day after the bound's
	// day, so that the rows of that day written so far are read now.
	To  string
	Mod watermark.Value
	// Watermark is what a run to this bound commits as the next from: To,
	// except for a date column, where it is the bound's day itself, which
	// can still receive rows and so is read again by the next run.
	Watermark    string
	WatermarkMod watermark.Value
	// Now is the server's clock in µs since the epoch, used as the run's
	// _hw_version.
	Now int64
	// Kind says what fixed To: "clock" when nothing held it back,
	// "oldest_transaction", "prepared_transaction", "replay", or
	// "fallback_lookback" when the open transactions could not be seen.
	Kind   string
	Detail string
	// Warnings name what the bound could not protect, so that only the
	// lookback does: a role that cannot see other sessions, a replica that
	// cannot see the primary's, the bound off, a stuck transaction ignored.
	// They are said at every run.
	Warnings []string
	// Replica: the source is a hot standby, which cannot see the primary's
	// open transactions.
	Replica bool
	// StuckSince, when set, is the start (a literal of the modified-at
	// type) of a transaction older than the cap, which the bound ignored:
	// the next run's from must stay at or below it (Commit.FromFloor)
	// until it ends, or its rows are lost if it ever commits.
	StuckSince *string
	// Prepared: a prepared transaction of the database is open. Its rows
	// carry its start, which is before its PREPARE and recorded nowhere,
	// so this bound cannot say how far back they reach.
	Prepared bool
}

// DefaultStuckCap is how long an open transaction may hold the bound back
// before it is treated as stuck and ignored.
const DefaultStuckCap = 5 * time.Minute

// BoundOptions tune UpperBoundWith.
type BoundOptions struct {
	// ClockOnly turns the open-transaction bound off: To is the clock, and
	// only the lookback protects rows of transactions that commit late.
	ClockOnly bool
	// StuckCap: transactions open longer are ignored and reported in
	// StuckSince (DefaultStuckCap when zero).
	StuckCap time.Duration
}

// UpperBound is UpperBoundWith with the default options.
func (s *Source) UpperBound(ctx context.Context, t *Table, tz string) (Bound, error) {
	return s.UpperBoundWith(ctx, t, tz, BoundOptions{})
}

// boundSQL samples, in one statement (so one snapshot of the activity
// views), the clock and everything that may hold the bound below it.
//
// A row stamped now() carries the start of its transaction but becomes
// visible only at commit, so any transaction still open may yet commit
// rows stamped at its start. Every open transaction of the database
// counts, not only those with an xid or xmin: in READ COMMITTED a
// transaction that has not written yet, between two statements, shows
// neither, and its first INSERT still stamps the old start.
// Only client backends of this database can write its tables; our own
// session is excluded. A session with track_activities off reports no
// xact_start (its state is 'disabled'), so its transactions are as
// invisible as another role's to an unprivileged one.
const boundSQL = `WITH c AS (SELECT clock_timestamp() AS now),
act AS (
	SELECT a.xact_start,
		format('pid %s (user %s, application %s)', a.pid, a.usename, coalesce(nullif(a.application_name, ''), '-')) AS who
	FROM pg_stat_activity a
	WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
	  AND a.backend_type = 'client backend' AND a.xact_start IS NOT NULL),
oldest AS (SELECT act.* FROM act, c WHERE act.xact_start >= c.now - $1::interval ORDER BY xact_start LIMIT 1),
stuck AS (SELECT act.* FROM act, c WHERE act.xact_start < c.now - $1::interval ORDER BY xact_start LIMIT 1),
prep AS (SELECT p.prepared, p.gid FROM pg_prepared_xacts p WHERE p.database = current_database()),
prepOldest AS (SELECT prep.* FROM prep, c WHERE prepared >= c.now - $1::interval ORDER BY prepared LIMIT 1),
prepStuck AS (SELECT prep.* FROM prep, c WHERE prepared < c.now - $1::interval ORDER BY prepared LIMIT 1),
untracked AS (
	SELECT format('pid %s (user %s, application %s)', a.pid, a.usename, coalesce(nullif(a.application_name, ''), '-')) AS who
	FROM pg_stat_activity a
	WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
	  AND a.backend_type = 'client backend' AND a.state = 'disabled')
SELECT c.now,
	(SELECT xact_start FROM oldest), (SELECT who FROM oldest),
	(SELECT xact_start FROM stuck), (SELECT who FROM stuck),
	(SELECT prepared FROM prepOldest), (SELECT gid FROM prepOldest),
	(SELECT prepared FROM prepStuck), (SELECT gid FROM prepStuck),
	pg_is_in_recovery(),
	CASE WHEN pg_is_in_recovery() THEN pg_last_xact_replay_timestamp() END,
	(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR pg_has_role('pg_read_all_stats', 'MEMBER'),
	current_user,
	(SELECT count(*) FROM untracked), (SELECT min(who) FROM untracked),
	EXISTS (SELECT FROM prep)
FROM c`

// UpperBoundWith computes the run's upper bound: the server's clock,
// lowered to the start of the oldest transaction still open on the
// source, the PREPARE time of the oldest prepared transaction (an upper
// bound on its start), and on a replica the last replayed commit; then
// converted to the modified-at column's type. tz interprets naive
// timestamps and dates.
func (s *Source) UpperBoundWith(ctx context.Context, t *Table, tz string, o BoundOptions) (Bound, error) {
	if o.StuckCap <= 0 {
		o.StuckCap = DefaultStuckCap
	}
	var (
		now                                    time.Time
		oldest, stuck, prep, prepStuck, replay *time.Time
		oldestWho, stuckWho, prepGID, stuckGID *string
		replica                                bool
		privileged                             *bool
		user                                   string
		untracked                              int64
		untrackedWho                           *string
		prepared                               bool
	)
	err := s.conn.QueryRow(ctx, boundSQL, s.oneShot(), fmt.Sprintf("%d microseconds", o.StuckCap.Microseconds())).Scan(
		&now, &oldest, &oldestWho, &stuck, &stuckWho, &prep, &prepGID, &prepStuck, &stuckGID, &replica, &replay, &privileged, &user, &untracked, &untrackedWho, &prepared)
	if err != nil {
		return Bound{}, s.classify("read the source clock and open transactions", err)
	}
	b := Bound{Now: now.UnixMicro(), Kind: "clock", Replica: replica, Prepared: prepared && !o.ClockOnly}
	to := now
	lower := func(ts *time.Time, kind, detail string) {
		if ts != nil && ts.Before(to) {
			to, b.Kind, b.Detail = *ts, kind, detail
		}
	}
	var stuckAt *time.Time
	if !o.ClockOnly {
		lower(oldest, "oldest_transaction", fmt.Sprintf("a transaction open since %s, %s", fmtTS(oldest), deref(oldestWho)))
		lower(prep, "prepared_transaction", fmt.Sprintf("prepared transaction %q, prepared at %s", deref(prepGID), fmtTS(prep)))
		if stuck != nil {
			stuckAt = stuck
			b.Warnings = append(b.Warnings, fmt.Sprintf("ignored the transaction of %s, open since %s, longer than the cap of %s: the next runs read from its start until it ends", deref(stuckWho), fmtTS(stuck), o.StuckCap))
		}
		if prepStuck != nil {
			if stuckAt == nil || prepStuck.Before(*stuckAt) {
				stuckAt = prepStuck
			}
			b.Warnings = append(b.Warnings, fmt.Sprintf("ignored prepared transaction %q, prepared at %s, longer than the cap of %s: the next runs read from then until it ends", deref(stuckGID), fmtTS(prepStuck), o.StuckCap))
		}
		if privileged == nil || !*privileged {
			b.Warnings = append(b.Warnings, fmt.Sprintf("role %s lacks pg_read_all_stats, so other roles' open transactions are invisible: only the lookback protects their rows (GRANT pg_read_all_stats TO %s)", user, quoteIdent(user)))
		}
		if untracked > 0 {
			b.Warnings = append(b.Warnings, fmt.Sprintf("sessions with track_activities off (%d, the first %s) report no transaction start, so their open transactions are invisible: only the lookback protects their rows (leave track_activities on)", untracked, deref(untrackedWho)))
		}
	} else {
		b.Warnings = append(b.Warnings, "the open-transaction bound is off: only the lookback protects rows of transactions that commit late")
	}
	if replica {
		// The standby's activity views show its own sessions only, and
		// the replayed snapshot lists the primary's xids, not their starts
		// (nor the transactions that have not written yet).
		b.Warnings = append(b.Warnings, "the source is a hot standby, which cannot see the primary's open transactions: only the lookback protects rows of transactions that commit later than it")
	}
	lower(replay, "replay", fmt.Sprintf("a replica, replayed up to %s", fmtTS(replay)))
	blind := o.ClockOnly || replica || privileged == nil || !*privileged || untracked > 0
	if b.Kind == "clock" && blind {
		b.Kind = "fallback_lookback"
	}
	if len(b.Warnings) > 0 {
		if b.Detail != "" {
			b.Detail += "; "
		}
		b.Detail += strings.Join(b.Warnings, "; ")
	}
	// The watermark is the bound itself; for a date, the bound's day,
	// which later transactions can still stamp. A date run reads that day
	// too, up to the next.
	raw, err := s.asModType(ctx, t, tz, to)
	if err != nil {
		return Bound{}, err
	}
	if b.WatermarkMod, err = modFromBinary(t.ModKind, raw); err != nil {
		return Bound{}, fmt.Errorf("read the source clock: %w", err)
	}
	b.Mod = b.WatermarkMod
	if t.ModKind == watermark.Date {
		b.Mod++
	}
	b.To, b.Watermark = watermark.Format(t.ModKind, b.Mod), watermark.Format(t.ModKind, b.WatermarkMod)
	if stuckAt != nil {
		raw, err := s.asModType(ctx, t, tz, *stuckAt)
		if err != nil {
			return Bound{}, err
		}
		m, err := modFromBinary(t.ModKind, raw)
		if err != nil {
			return Bound{}, fmt.Errorf("read the stuck transaction's start: %w", err)
		}
		f := watermark.Format(t.ModKind, m)
		b.StuckSince = &f
	}
	return b, nil
}

// asModType converts a server timestamptz to the modified-at column's
// type on the server, so that the time zone rules are PostgreSQL's. A date
// is the day of ts.
func (s *Source) asModType(ctx context.Context, t *Table, tz string, ts time.Time) ([]byte, error) {
	var expr string
	args := []any{pgxBinary, ts}
	switch t.ModKind {
	case watermark.Timestamptz:
		expr = "$1::timestamptz"
	case watermark.Timestamp:
		expr = "($1::timestamptz AT TIME ZONE $2::text)"
	case watermark.Date:
		expr = "($1::timestamptz AT TIME ZONE $2::text)::date"
	}
	if t.ModKind != watermark.Timestamptz {
		args = append(args, tz)
	}
	var raw []byte
	rows, err := s.conn.Query(ctx, "SELECT "+expr, args...)
	if err != nil {
		return nil, s.classify("read the source clock", err)
	}
	for rows.Next() {
		raw = append([]byte(nil), rows.RawValues()[0]...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.classify("read the source clock", err)
	}
	return raw, nil
}

func fmtTS(ts *time.Time) string {
	if ts == nil {
		return "(none)"
	}
	return ts.UTC().Format("2006-01-02 15:04:05.000000Z")
}

func deref(s *string) string {
	if s == nil {
		return "(unknown)"
	}
	return *s
}

// Normalize reads a literal given by a person (a backfill window's end,
// say) through the column's type input function, and returns it in the
// form this package writes.
func (s *Source) Normalize(ctx context.Context, t *Table, literal string) (string, watermark.Value, error) {
	mod := t.Columns[t.modIdx]
	rows, err := s.conn.Query(ctx, "SELECT "+cast(1, mod.TypeName), pgxBinary, literal)
	if err != nil {
		return "", 0, s.classify(fmt.Sprintf("read %q as %s", literal, mod.TypeName), err)
	}
	defer rows.Close()
	var raw []byte
	for rows.Next() {
		raw = append([]byte(nil), rows.RawValues()[0]...)
	}
	if err := rows.Err(); err != nil {
		return "", 0, fmt.Errorf("read %q as %s: %w: %w", literal, mod.TypeName, err, ErrBadModel)
	}
	m, err := modFromBinary(t.ModKind, raw)
	if err != nil {
		return "", 0, err
	}
	return watermark.Format(t.ModKind, m), m, nil
}
