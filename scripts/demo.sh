#!/usr/bin/env bash
# demo.sh runs highwater end to end on the embedded default: a throwaway
# PostgreSQL with a sample table, a local directory as the lake. It exports,
# changes rows, exports again, shows the status and the committed files,
# deduplicates, and queries the result with DuckDB.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=$PWD/demo
HW=$PWD/bin/highwater
rm -rf "$DEMO"
mkdir -p "$DEMO"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# A throwaway PostgreSQL on 127.0.0.1. initdb refuses to run as root, so as
# root the cluster belongs to the postgres user.
PGBIN=$(dirname "$(readlink -f "$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl | tail -1)")")
PGDIR=$DEMO/pg
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)
AS=()
mkdir -p "$PGDIR"
if [[ $(id -u) -eq 0 ]]; then chown postgres "$PGDIR"; AS=(runuser -u postgres --); fi
"${AS[@]}" "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
"${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1" -w start >/dev/null
trap '"${AS[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast stop >/dev/null' EXIT
SRC="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
LAKE="file://$DEMO/lake"
psql() { command psql -q -X -v ON_ERROR_STOP=1 "$SRC" "$@"; }

say "A sample table: 10,000 orders"
psql <<'SQL'
CREATE TABLE orders (
  id          bigint PRIMARY KEY,
  customer    text NOT NULL,
  amount      numeric(12,2) NOT NULL,
  status      text NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_updated_at_id ON orders (updated_at, id);
INSERT INTO orders (id, customer, amount, status, updated_at)
SELECT g, 'customer-' || (g % 500), round((random() * 1000)::numeric, 2), 'new', now() - interval '1 day' + g * interval '1 ms'
FROM generate_series(1, 10000) g;
SQL

EXPORT=("$HW" export --source "$SRC" --table public.orders --primary-key id --modified-at updated_at --dest "$LAKE")

say "First export: every row"
"${EXPORT[@]}" 2>"$DEMO/export-1.log"

say "Change 100 orders, add 50, then export again (reads only what changed, plus a 30 s lookback)"
psql -c "UPDATE orders SET status = 'shipped', updated_at = now() WHERE id % 100 = 0"
psql -c "INSERT INTO orders (id, customer, amount, status) SELECT g, 'customer-new', 9.99, 'new' FROM generate_series(10001, 10050) g"
"${EXPORT[@]}" 2>"$DEMO/export-2.log"

say "highwater status: the watermark history, one commit a line"
"$HW" status --dest "$LAKE"

say "highwater files: the committed set"
"$HW" files --dest "$LAKE" --model orders

if "$HW" dedupe -h >/dev/null 2>&1; then
	say "highwater dedupe: one row per key"
	"$HW" dedupe --dest "$LAKE" --model orders 2>"$DEMO/dedupe.log"
	"$HW" status --dest "$LAKE"
fi

say "DuckDB over the committed files"
"$HW" files --dest "$LAKE" --model orders | go run ./internal/tools/lakequery \
	"SELECT count(*) AS rows, count(DISTINCT id) AS keys, count(*) FILTER (WHERE status = 'shipped') AS shipped, sum(amount) AS total FROM lake"
say "The same question to PostgreSQL"
psql -c "SELECT count(*) AS rows, count(DISTINCT id) AS keys, count(*) FILTER (WHERE status = 'shipped') AS shipped, sum(amount) AS total FROM orders"
echo
echo "The lake is in $DEMO/lake; logs in $DEMO/*.log."
