#!/usr/bin/env bash
# deps.sh installs what highwater's tests and demo need on a fresh Debian
# machine with Go: PostgreSQL's server binaries (from Debian) and the
# object-store servers (into the cache, see servers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then
	echo "deps.sh: installing PostgreSQL server binaries" >&2
	if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
	# initdb refuses to run as root; the tests run it as this user.
	useradd --system --home /var/lib/postgresql --shell /bin/bash postgres
fi
if [[ ${HIGHWATER_SKIP_OBJECT_STORES:-} != 1 ]]; then
	scripts/servers.sh install
fi
