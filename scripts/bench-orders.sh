#!/usr/bin/env bash
# Order benchmark, everything on this machine in one run: POST /v1/servers
# through the gateway's product host (bearer resolved by identity, cached),
# API-fulfilled SKU, so every order is a server row, a provisioning job, its
# `server.created` event and audit event (outbox) in one transaction, and later
# its `server.active` (the provisioning job, sandbox provider). Orders
# as fast as they are answered with 8 and then 64 clients (tests-e2e's
# `order-load`, organizations round robin); then how fast `server.active`
# followed: servers of that phase reaching `active` (their `activated_at`),
# the lag from order to activation (the sandbox's delay included), and the
# outbox drained (every event on the PRODUCT stream).
# Same-run reference (absolute figures move 2-4x between days on this
# machine): pgbench of a one-row INSERT transaction, 64 clients, on the same
# cluster, before the stack starts and after it stopped.
# Postgres: a cluster of the benchmark's own with production's defaults
# (fsync on, autovacuum on), or BENCH_PG=shared to use PGHOST/PGPORT if it is
# configured so (scripts/lib/bench-postgres.sh); the output says which.
# Usage: [BENCH_PG=own|shared] [ORGS=8] [SANDBOX_DELAY_MS=3000] [CLIENTS="8 64"]
#        [BENCH_BIN=dir of prebuilt devstack and order-load] [PROFILE=dir [PROFILE_SECS=10]]
#        scripts/bench-orders.sh [orders per phase, default 20000]
# Stop `make run` first (same ports).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-20000}
ORGS=${ORGS:-8}
DELAY_MS=${SANDBOX_DELAY_MS:-3000}
PHASES=${CLIENTS:-8 64}
REF_SECS=${REF_SECS:-10}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
. scripts/lib/bench-postgres.sh
DB=hub_bench_orders
REFDB=hub_bench_orders_ref
NATS=nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}
PREFIX=benchord.
WORK=$(mktemp -d)
# The binaries are copied out of the shared target directory at once (another
# checkout's build may replace them there); BENCH_BIN names a directory of
# devstack and order-load built before (to compare two builds in one session).
BIN="$WORK/bin"
mkdir -p "$BIN"
if [ -n "${BENCH_BIN:-}" ]; then
  cp "$BENCH_BIN/devstack" "$BENCH_BIN/order-load" "$BIN/"
else
  cargo build --release -q -p hub-stack --bin devstack
  cargo build --release -q -p tests-e2e --bin order-load
  cp "$CARGO_TARGET_DIR/release/devstack" "$CARGO_TARGET_DIR/release/order-load" "$BIN/"
fi

stack=
cleanup() { [ -n "$stack" ] && kill "$stack" 2>/dev/null; wait 2>/dev/null || true; bench_postgres_stop; rm -rf "$WORK"; }
trap cleanup EXIT
bench_postgres_start
for d in $DB $REFDB; do
  psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" 2>/dev/null
  psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $d"
done
q() { psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -Atqc "$1"; }
if [ -n "${PROFILE:-}" ]; then
  mkdir -p "$PROFILE"
  if [ -n "${BENCH_PG_DIR:-}" ]; then
    q "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
    run_pg "$BENCH_PG_CTL" -D "$BENCH_PG_DIR/data" -w -m fast restart >/dev/null
    q "CREATE EXTENSION pg_stat_statements" >/dev/null
  fi
fi

# The reference: one row per transaction, as many clients as the big phase.
psql -h "$PGH" -p "$PGP" -U postgres -d "$REFDB" -qc \
  "CREATE TABLE ref (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, org uuid NOT NULL, note text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
pgs="$WORK/ref.sql"
echo "INSERT INTO ref (org, note) VALUES (gen_random_uuid(), 'order');" >"$pgs"
pgbench_ref() {
  psql -h "$PGH" -p "$PGP" -U postgres -d "$REFDB" -qc "CHECKPOINT"
  pgbench -h "$PGH" -p "$PGP" -U postgres -n -c64 -j2 -T "$REF_SECS" -f "$pgs" "$REFDB" 2>/dev/null |
    awk '/^tps/ {printf "%.0f", $3; exit}'
}
ref_before=$(pgbench_ref)

. scripts/lib/bench-logging.sh
bench_logging IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY
export HUB_PROFILE=dev HUB_DATABASE_URL="postgres://postgres@$PGH:$PGP/$DB" HUB_NATS_URL="$NATS"
export SERVER_PRODUCT__PROVIDER__SANDBOX_DELAY_MS=$DELAY_MS
# Thousands of orders per organization: no server cap, no order rate limit.
export SERVER_PRODUCT__ORDERS__MAX_SERVERS_PER_ORG=0 SERVER_PRODUCT__ORDERS__RATE_PER_MINUTE=0
[ "$ORGS" -gt 10 ] && export ORG_BILLING__ORGS__MAX_CREATED_PER_DAY=$ORGS
for svc in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY; do
  export "${svc}__NATS__SUBJECT_PREFIX=$PREFIX" "${svc}__NATS__STREAM_SUFFIX=_benchord" "${svc}__NATS__MEMORY_STORAGE=true"
done
"$BIN/devstack" >"$WORK/stack.log" 2>&1 & stack=$!
for _ in $(seq 1 600); do curl -fs localhost:8080/healthz >/dev/null 2>&1 && curl -fs localhost:8090/healthz >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs localhost:8090/healthz >/dev/null || { echo "the stack did not start:"; tail -20 "$WORK/stack.log"; exit 1; }

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' -d '{"email":"bench-orders@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
: >"$WORK/orgs"
for i in $(seq 1 "$ORGS"); do
  org=$(curl -fs localhost:8090/core-api/v1/organizations -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d "{\"name\":\"Bench Orders $i\",\"legal_type\":\"corporate\",\"country\":\"TR\"}")
  echo "$org" | python3 -c "import json, sys; print(json.load(sys.stdin)['id'])" >>"$WORK/orgs"
done

# CPU seconds used so far by the stack, the bench cluster's Postgres (its
# postmaster, the children it reaped and its living backends) and NATS (the
# machine's, shared). The load generator's own is not counted.
# (A backend that exits between listing and reading is skipped: its time
# moves to the postmaster's reaped children.)
ticks() { cat "$@" 2>/dev/null | awk -v hz="$(getconf CLK_TCK)" '{s += $14 + $15 + $16 + $17} END {printf "%.1f", s / hz}'; }
pg_pm=$(head -1 "${BENCH_PG_DIR:-/nonexistent}/data/postmaster.pid" 2>/dev/null || echo)
cpu_now() {
  local pg=0
  if [ -n "$pg_pm" ]; then
    pg=$(ticks /proc/"$pg_pm"/stat $(ps --ppid "$pg_pm" -o pid= | sed 's|^ *\(.*\)|/proc/\1/stat|'))
  fi
  echo "$(ticks /proc/$stack/stat) $pg $(ticks $(pgrep -x nats-server | sed 's|.*|/proc/&/stat|'))"
}
cpu_delta() { # "before" "after" -> what was used between them
  python3 -c "import sys; a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
d = [y - x for x, y in zip(a, b)]
print(f'devstack {d[0]:.1f} s, postgres {d[1]:.1f} s, nats-server {d[2]:.1f} s')" "$1" "$2"
}

# Servers of run $1 that are active, and the figures of their activation.
active_count() { q "SELECT count(*) FROM server_product.servers WHERE hostname LIKE 'ol-$1-%' AND status = 'active'"; }
activation() {
  q "SELECT count(*),
            round(1000 * extract(epoch FROM max(activated_at))),
            round((count(*) / greatest(extract(epoch FROM max(activated_at) - min(created_at)) - $DELAY_MS / 1000.0, 0.001))::numeric),
            round((1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY activated_at - created_at)))::numeric),
            round((1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY activated_at - created_at)))::numeric),
            round((1000 * extract(epoch FROM max(activated_at - created_at)))::numeric)
       FROM server_product.servers WHERE hostname LIKE 'ol-$1-%' AND status = 'active'"
}
field() { echo "$1" | awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}'; }

# PROFILE=dir: during each phase, perf (whole machine, cpu-clock, call
# graphs) for PROFILE_SECS from 2 s in, pg_stat_activity's wait events of
# active backends every 0.1 s, and pg_stat_statements (own cluster only),
# saved to dir as perf-<clients>.data, waits-<clients>.txt, statements-<clients>.txt.
profile_start() { # clients
  [ -n "${PROFILE:-}" ] || return 0
  [ -n "${BENCH_PG_DIR:-}" ] && q "SELECT pg_stat_statements_reset()" >/dev/null
  (sleep 2; perf record -e cpu-clock -F 999 -a -g -o "$PROFILE/perf-$1.data" -- sleep "${PROFILE_SECS:-10}" >/dev/null 2>&1) &
  prof_perf=$!
  # One session, sampling with \watch (a psql per sample would cost more than it measures).
  psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -Atq >"$WORK/waits-$1.raw" 2>/dev/null <<SQL &
SELECT application_name, coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'running'), left(regexp_replace(query, '\\s+', ' ', 'g'), 60)
  FROM pg_stat_activity WHERE state <> 'idle' AND backend_type = 'client backend' AND pid <> pg_backend_pid() \\watch 0.1
SQL
  prof_waits=$!
}
profile_stop() { # clients
  [ -n "${PROFILE:-}" ] || return 0
  kill "$prof_waits" 2>/dev/null; wait "$prof_perf" 2>/dev/null || true
  sort "$WORK/waits-$1.raw" | uniq -c | sort -rn | head -40 >"$PROFILE/waits-$1.txt"
  [ -n "${BENCH_PG_DIR:-}" ] && q "SELECT calls, round(total_exec_time::numeric, 1) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
      left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 30" >"$PROFILE/statements-$1.txt"
  return 0
}

run_phase() { # clients orders -> prints the figures
  local c=$1 n=$2 out run t_last left cpu0 cpu1 cpu2
  q "CHECKPOINT"
  profile_start "$c"
  cpu0=$(cpu_now)
  out=$("$BIN/order-load" http://127.0.0.1:8090 "$TOKEN" "$WORK/orgs" "$n" "$c" 0)
  cpu1=$(cpu_now)
  profile_stop "$c"
  run=$(field "$out" run)
  t_last=$(field "$out" last_unix_ms)
  # Every order of the phase active (the whole pipeline kept up, or how far
  # behind it fell), then the outbox drained.
  for _ in $(seq 1 "${ACTIVE_WAIT_S:-900}0"); do
    [ "$(active_count "$run")" -ge "$n" ] && break; sleep 0.1
  done
  for _ in $(seq 1 300); do
    left=$(q "SELECT count(*) FROM server_product.outbox"); [ "$left" = 0 ] && break; sleep 0.1
  done
  cpu2=$(cpu_now)
  IFS='|' read -r act last_ms rate lag50 lag99 lagmax <<<"$(activation "$run")"
  printf '%2s clients: %s orders in %s s = %s orders/s, latency p50 %s ms p99 %s ms max %s ms\n' \
    "$c" "$(field "$out" orders)" "$(field "$out" seconds)" "$(field "$out" orders/s)" \
    "$(field "$out" p50_ms)" "$(field "$out" p99_ms)" "$(field "$out" max_ms)"
  printf '            server.active: %s of %s, the last %.1f s after the last order was answered (sandbox delay %s ms) = %s activations/s net of the delay; order->active p50 %s ms p99 %s ms max %s ms; outbox rows left %s\n' \
    "$act" "$n" "$(python3 -c "print((${last_ms:-0} - $t_last) / 1000)")" "$DELAY_MS" "$rate" "$lag50" "$lag99" "$lagmax" "$left"
  echo "            CPU while ordering: $(cpu_delta "$cpu0" "$cpu1"); after it, until all active: $(cpu_delta "$cpu1" "$cpu2")"
}

echo "orders: $(nproc) cores, $(date -u +%FT%TZ), $TOTAL orders per phase, $ORGS organizations, sku vps-small (api), sandbox delay $DELAY_MS ms"
echo "$BENCH_PG_SAYS"
echo "reference before the stack: pgbench one-row INSERT transaction -c64 -j2 -T$REF_SECS: $ref_before tps"
# Warm-up (not reported): connections, caches, the first autovacuum.
"$BIN/order-load" http://127.0.0.1:8090 "$TOKEN" "$WORK/orgs" 1000 8 0 >/dev/null
sleep "$(python3 -c "print($DELAY_MS / 1000 + 2)")"
for c in $PHASES; do
  run_phase "$c" "$TOTAL"
done
kill "$stack" 2>/dev/null; wait "$stack" 2>/dev/null || true; stack=
echo "reference after the stack: pgbench one-row INSERT transaction -c64 -j2 -T$REF_SECS: $(pgbench_ref) tps"
