#!/usr/bin/env bash
# bench.sh runs highwater's benchmark programs (make bench builds
# bin/highwater first). Each prints figures; none asserts a duration.
#
#   bench/export   export vs COPY (FORMAT binary), peak RSS, no-change run,
#                  --page-rows and --row-group-size sweeps, and a table of
#                  wide rows (1-50 MiB values: peak RSS, file size against
#                  the raw bytes; -wide-rows 0 skips it), and a tenant
#                  fan-out of 10M rows over 1,000 tenants with --parallel 8
#                  (-tenant-rows 0 skips it), and an incremental run with
#                  1% of 1M rows deleted (--delete-log) against the same
#                  run with 1% updated (-delete-rows 0 skips it)
#                  (docs/bench.md)
#   bench/upload   object-store upload (needs the S3 server: started here)
#   bench/dedupe   dedupe against DuckDB on a lake made by highwater export
#                  from PostgreSQL (5M rows + 1M updates, then 10% more),
#                  median of 3 (docs/dedupe.md)
#   bench/reconcile  reconcile of N rows against a full export of the same
#                  table, wall time and peak RSS
#
# Programs that do not exist yet are skipped. Arguments are passed to
# bench/export, e.g. scripts/bench.sh -sizes 1000000 -sweep-rows 0.
# HIGHWATER_BENCH_CPUPROFILE=FILE makes bench/export also profile an
# in-process export (see bench/export/main.go).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${HIGHWATER_CACHE:-$HOME/.cache/highwater}

has_program() { compgen -G "bench/$1/*.go" >/dev/null; }

if [[ ! -x bin/highwater ]]; then
	go build -o bin/highwater ./cmd/highwater
fi

status=0
echo "== bench/export ==" >&2
go run ./bench/export -bin bin/highwater "$@" || status=1

if has_program upload; then
	echo "== bench/upload ==" >&2
	# Servers that were already running (a developer's) are left running.
	started=$(scripts/servers.sh start 2>&1) || { echo "$started" >&2; exit 1; }
	echo "$started" >&2
	if [[ $started != *"already running"* ]]; then
		trap 'scripts/servers.sh stop' EXIT
	fi
	(
		set -a
		# shellcheck disable=SC1091
		. "$CACHE/servers.env"
		set +a
		go run ./bench/upload
	) || status=1
else
	echo "== bench/upload: not there yet, skipped ==" >&2
fi

if has_program dedupe; then
	echo "== bench/dedupe ==" >&2
	go run ./bench/dedupe -bin bin/highwater || status=1
else
	echo "== bench/dedupe: not there yet, skipped ==" >&2
fi
if has_program reconcile; then
	echo "== bench/reconcile ==" >&2
	go run ./bench/reconcile -bin bin/highwater || status=1
fi
exit $status
