#!/usr/bin/env bash
# test.sh starts the object-store servers, runs every test against them and
# a throwaway PostgreSQL, and stops the servers whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${HIGHWATER_CACHE:-$HOME/.cache/highwater}

# Servers that were already running (a developer's) are left running.
started=$(scripts/servers.sh start 2>&1) || { echo "$started" >&2; exit 1; }
echo "$started" >&2
if [[ $started != *"already running"* ]]; then
	trap 'scripts/servers.sh stop' EXIT
fi
set -a
# shellcheck disable=SC1091
. "$CACHE/servers.env"
set +a
go vet ./...
go test -p 2 -timeout 14m -count=1 "$@" ./...
