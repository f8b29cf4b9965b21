#!/usr/bin/env bash
# servers.sh installs, starts and stops the object-store servers that
# highwater's tests run against: versitygw (S3), fake-gcs-server (GCS) and
# Azurite (Azure Blob). Everything lives in a cache outside the clone, so a
# second run neither rebuilds nor re-downloads anything.
#
#   scripts/servers.sh install   # go install / npm install, skipping what is there
#   scripts/servers.sh start     # start all three on 127.0.0.1, wait until ready,
#                                # write $CACHE/servers.env
#   scripts/servers.sh stop      # stop them (pids in $CACHE/servers.pids)
#   scripts/servers.sh env       # print the path of the env file
#
# The env file exports only HIGHWATER_TEST_* variables and test credentials.
# It deliberately does not export AWS_ENDPOINT_URL or STORAGE_EMULATOR_HOST:
# those would silently redirect every other SDK use in the process. Tests
# set them with t.Setenv from the HIGHWATER_TEST_* values.
set -euo pipefail

CACHE=${HIGHWATER_CACHE:-$HOME/.cache/highwater}
BIN=$CACHE/bin
ENV_FILE=$CACHE/servers.env
PID_FILE=$CACHE/servers.pids
RUN_DIR=$CACHE/run

VERSITYGW_VERSION=v1.8.0
FAKE_GCS_VERSION=v1.56.1
AZURITE_VERSION=3.35.0

S3_ACCESS=testkey
S3_SECRET=testsecret
AZURE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

log() { echo "servers.sh: $*" >&2; }

install() {
	mkdir -p "$BIN"
	if [[ -x $BIN/versitygw ]] && [[ $(cat "$BIN/.versitygw.version" 2>/dev/null) == "$VERSITYGW_VERSION" ]]; then
		log "versitygw $VERSITYGW_VERSION already installed"
	else
		log "installing versitygw $VERSITYGW_VERSION (about 90 s cold)"
		GOBIN=$BIN GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
		echo "$VERSITYGW_VERSION" >"$BIN/.versitygw.version"
	fi
	if [[ -x $BIN/fake-gcs-server ]] && [[ $(cat "$BIN/.fake-gcs-server.version" 2>/dev/null) == "$FAKE_GCS_VERSION" ]]; then
		log "fake-gcs-server $FAKE_GCS_VERSION already installed"
	else
		log "installing fake-gcs-server $FAKE_GCS_VERSION (about 60 s cold)"
		GOBIN=$BIN GOFLAGS=-buildvcs=false go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"
		echo "$FAKE_GCS_VERSION" >"$BIN/.fake-gcs-server.version"
	fi
	if [[ -x $CACHE/node_modules/.bin/azurite-blob ]] &&
		grep -q "\"version\": \"$AZURITE_VERSION\"" "$CACHE/node_modules/azurite/package.json" 2>/dev/null; then
		log "azurite $AZURITE_VERSION already installed"
	else
		log "installing azurite $AZURITE_VERSION (about 25 s)"
		npm install --prefix "$CACHE" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >&2
	fi
}

# listening PORT: whether something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port PREFERRED: PREFERRED if nothing listens there, else the next free
# one above it. Another process may take it before we bind; start then fails
# its readiness wait with a clear message rather than hanging.
free_port() {
	local p=$1
	while listening "$p"; do
		p=$((p + 1))
	done
	echo "$p"
}

# wait_status NAME URL CODE: wait up to 30 s until URL answers with CODE.
wait_status() {
	local name=$1 url=$2 want=$3 got i
	for i in $(seq 1 150); do
		got=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
		if [[ $got == "$want" ]]; then
			return 0
		fi
		sleep 0.2
	done
	log "$name did not become ready at $url (last status $got); see $RUN_DIR/$name.log"
	return 1
}

running() {
	[[ -f $PID_FILE && -f $ENV_FILE ]] || return 1
	local pid
	while read -r _ pid; do
		kill -0 "$pid" 2>/dev/null || return 1
	done <"$PID_FILE"
	return 0
}

start() {
	for b in "$BIN/versitygw" "$BIN/fake-gcs-server" "$CACHE/node_modules/.bin/azurite-blob"; do
		[[ -x $b ]] || {
			log "$b is missing: run scripts/servers.sh install first"
			exit 1
		}
	done
	if running; then
		# shellcheck disable=SC1090
		. "$ENV_FILE"
		if wait_status versitygw "$HIGHWATER_TEST_S3_ENDPOINT/" 403 &&
			wait_status fake-gcs-server "http://$HIGHWATER_TEST_GCS_ENDPOINT/storage/v1/b" 200 &&
			wait_status azurite "$(sed -n 's/.*BlobEndpoint=\([^;]*\);.*/\1/p' "$ENV_FILE")?comp=list" 403; then
			log "already running; env in $ENV_FILE"
			return 0
		fi
		stop
	fi
	stop_quiet
	mkdir -p "$RUN_DIR"
	: >"$PID_FILE"

	local s3port gcsport azport s3dir
	s3port=$(free_port 7070)
	s3dir=$(mktemp -d "${TMPDIR:-/tmp}/highwater-versitygw.XXXXXX")
	# versitygw reads its credentials from the environment too; pass them as
	# flags so the ones in the caller's environment do not interfere.
	"$BIN/versitygw" --port "127.0.0.1:$s3port" --access "$S3_ACCESS" --secret "$S3_SECRET" --quiet \
		posix "$s3dir" >"$RUN_DIR/versitygw.log" 2>&1 &
	echo "versitygw $!" >>"$PID_FILE"
	echo "$s3dir" >"$RUN_DIR/versitygw.dir"

	gcsport=$(free_port 4443)
	"$BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$gcsport" \
		-public-host "127.0.0.1:$gcsport" -external-url "http://127.0.0.1:$gcsport" \
		-backend memory -log-level error >"$RUN_DIR/fake-gcs-server.log" 2>&1 &
	echo "fake-gcs-server $!" >>"$PID_FILE"

	azport=$(free_port 10000)
	# Run from RUN_DIR: whatever Azurite writes to its working directory
	# lands there, not in the clone. exec keeps the pid that $! reports.
	# Strict mode (no --loose), as developers run Azurite: the backend must
	# work there, and strict mode refuses what it does not check rather than
	# accepting it silently.
	(cd "$RUN_DIR" && exec "$CACHE/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$azport" \
		--inMemoryPersistence --silent --disableTelemetry --skipApiVersionCheck) >"$RUN_DIR/azurite.log" 2>&1 &
	echo "azurite $!" >>"$PID_FILE"

	if ! wait_status versitygw "http://127.0.0.1:$s3port/" 403 ||
		! wait_status fake-gcs-server "http://127.0.0.1:$gcsport/storage/v1/b" 200 ||
		! wait_status azurite "http://127.0.0.1:$azport/devstoreaccount1?comp=list" 403; then
		stop_quiet
		exit 1
	fi

	cat >"$ENV_FILE" <<EOF
# Written by scripts/servers.sh start. Source it before go test.
export HIGHWATER_TEST_S3_ENDPOINT=http://127.0.0.1:$s3port
export AWS_ACCESS_KEY_ID=$S3_ACCESS
export AWS_SECRET_ACCESS_KEY=$S3_SECRET
export AWS_REGION=us-east-1
export HIGHWATER_TEST_GCS_ENDPOINT=127.0.0.1:$gcsport
export HIGHWATER_TEST_AZURE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=$AZURE_KEY;BlobEndpoint=http://127.0.0.1:$azport/devstoreaccount1;'
EOF
	log "versitygw on :$s3port, fake-gcs-server on :$gcsport, azurite on :$azport; env in $ENV_FILE"
}

# stop_quiet kills what the pid file names, by pid only.
stop_quiet() {
	[[ -f $PID_FILE ]] || return 0
	local name pid
	while read -r name pid; do
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 1 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -9 "$pid" 2>/dev/null || true
		fi
	done <"$PID_FILE"
	rm -f "$PID_FILE"
	if [[ -f $RUN_DIR/versitygw.dir ]]; then
		rm -rf "$(cat "$RUN_DIR/versitygw.dir")"
		rm -f "$RUN_DIR/versitygw.dir"
	fi
}

stop() {
	stop_quiet
	rm -f "$ENV_FILE"
	log "stopped"
}

case ${1:-} in
install) install ;;
start) start ;;
stop) stop ;;
env) echo "$ENV_FILE" ;;
*)
	echo "usage: $0 install|start|stop|env" >&2
	exit 2
	;;
esac
