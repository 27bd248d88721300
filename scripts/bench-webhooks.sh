#!/usr/bin/env bash
# Webhook delivery benchmark, everything on this machine in one run.
#
# 1. The public path (what customers get): servers ordered with
#    `POST /v1/servers` through the gateway by CLIENTS clients (tests-e2e's
#    `order-load`); every order commits `server.created` through
#    server-product's outbox and its provisioning job commits `server.active`
#    (sandbox provider answering at once); both reach the file-backed PRODUCT
#    stream, the dispatcher fans them out and delivers them to a local receiver
#    that answers 200 at once and checks both signatures. Saturated phases of
#    DELIVERIES deliveries at 1, 10, 50 and 100 endpoints per organization,
#    timed from the first order to the last delivery.
# 2. Svix through its API in the same run, alternating with 1 (only when
#    SVIX_SERVER names a svix-server binary: scripts/lib/bench-svix.sh).
# 3. Second figure, labelled: events published straight into the stream
#    (`webhook-bench publish`), skipping the gateway, server-product and its
#    outbox, at 1, 10, 50 and 100 endpoints.
# 4. Sustained: three phases of SUSTAINED deliveries back to back on the same
#    database, public path, 50 endpoints (SUSTAINED=0 leaves them out).
# 5. Latency at 500 events/s (250 orders/s, 1 endpoint), from each event's
#    `created_at` (the order's or the activation's transaction) to arrival.
# Every phase counts lost, duplicated and badly signed deliveries.
# Postgres: a cluster of the benchmark's own with production's defaults
# (fsync and autovacuum on), or BENCH_PG=shared to use PGHOST/PGPORT if it is
# configured so (scripts/lib/bench-postgres.sh); the output says which.
# Usage: [BENCH_PG=own|shared] [CLIENTS=64] [SUSTAINED=200000] [SVIX_SERVER=path] [FANOUTS="1 10 50 100"]
#        scripts/bench-webhooks.sh [deliveries per saturated phase, default 20000]
# Stop `make run` first (same ports).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-20000}
CLIENTS=${CLIENTS:-64}
SUSTAINED=${SUSTAINED:-200000}
FANOUTS=${FANOUTS:-1 10 50 100}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
. scripts/lib/bench-postgres.sh
DB=hub_bench_webhooks
NATS=nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}
PREFIX=benchwh.
WORK=$(mktemp -d)
cargo build --release -q -p hub-stack --bin devstack
cargo build --release -q -p tests-e2e --bin webhook-bench --bin order-load
SVIX=
if [ -n "${SVIX_SERVER:-}" ]; then
  # Svix's database pool (80) beside the stack's (about 56).
  export BENCH_PG_MAX_CONNECTIONS=${BENCH_PG_MAX_CONNECTIONS:-200}
  . scripts/lib/bench-svix.sh
  cargo build --release -q -p tests-e2e --bin svix-bench
  SVIX=1
fi

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$SVIX" ] && svix_stop
  wait 2>/dev/null || true
  bench_postgres_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
bench_postgres_start
psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null
psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $DB"
q() { psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -Atqc "$1"; }

. scripts/lib/bench-logging.sh
bench_logging IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY
export HUB_PROFILE=dev HUB_DATABASE_URL="postgres://postgres@$PGH:$PGP/$DB" HUB_NATS_URL="$NATS"
# 100 endpoints in one organization (the default cap is 20); eight
# organizations a day for one user (the default is 5).
export WEBHOOK_DISPATCHER__WEBHOOKS__MAX_ENDPOINTS_PER_ORG=100 ORG_BILLING__ORGS__MAX_CREATED_PER_DAY=20
# The sandbox provider answers at once, and its jobs are looked at every 50 ms:
# `server.active` follows the order as closely as a provider allows.
export SERVER_PRODUCT__PROVIDER__SANDBOX_DELAY_MS=0 SERVER_PRODUCT__PROVIDER__POLL_MS=50
for svc in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY; do
  # Streams of the benchmark's own, stored in files as in production.
  export "${svc}__NATS__SUBJECT_PREFIX=$PREFIX" "${svc}__NATS__STREAM_SUFFIX=_benchwh"
done
"$BIN/devstack" >"$WORK/stack.log" 2>&1 & pids+=($!)
for _ in $(seq 1 600); do curl -fs localhost:8085/healthz >/dev/null 2>&1 && curl -fs localhost:8090/healthz >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs localhost:8090/healthz >/dev/null || { echo "the stack did not start:"; tail -20 "$WORK/stack.log"; exit 1; }

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' -d '{"email":"bench-hooks@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
: >"$WORK/secrets"
idx=0
declare -A ORG
# One organization per fan-out for the public path ("o") and one for the
# direct phases ("d"): each phase's events reach only its own endpoints.
for kind in o d; do
  for n in $FANOUTS; do
    org=$(curl -fs localhost:8090/core-api/v1/organizations -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
          -d "{\"name\":\"Bench $kind $n\",\"legal_type\":\"corporate\",\"country\":\"TR\"}" | sed -E 's/.*"id":"([^"]+)".*/\1/')
    ORG[$kind$n]=$org
    for _ in $(seq 1 "$n"); do
      secret=$(curl -fs localhost:8090/v1/webhooks -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
               -d "{\"org_id\":\"$org\",\"url\":\"http://127.0.0.1:9900/r/$idx\"}" | sed -E 's/.*"secret":"([^"]+)".*/\1/')
      echo "$secret" >>"$WORK/secrets"; idx=$((idx + 1))
    done
  done
done
"$BIN/webhook-bench" receive 9900 "$WORK/secrets" >"$WORK/receiver.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -fs localhost:9900/stats >/dev/null 2>&1 && break; sleep 0.05; done

# CPU seconds so far, summed per program (Postgres: the benchmark cluster's
# processes, when it is the benchmark's own).
cpu() {
  local pm pids
  pids=$(pgrep -d, -f 'release/devstack|webhook-bench receive|nats-server|svix-server|redis-server')
  pm=$(head -n1 "${BENCH_PG_DIR:-/nonexistent}/data/postmaster.pid" 2>/dev/null) || true
  [ -n "$pm" ] && pids="$pids,$pm,$(pgrep -d, -P "$pm")"
  ps -o comm=,cputimes= -p "$pids" 2>/dev/null | awk '{a[$1] += $2} END {for (k in a) printf "%s %ds  ", k, a[k]}'
}
stat() { curl -fs localhost:9900/stats; }
# A number field of the receiver's one-line JSON (no interpreter started per poll).
jfield() { sed -E "s/.*\"$1\":([^,}]*).*/\1/"; }
# Deliveries so far: polled every 100 ms, so the cheapest question.
count() { curl -fs localhost:9900/count; }
kfield() { echo "$1" | awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}'; }

# Wait until the receiver has $1 deliveries (or nothing more arrives for 30 s),
# then print one phase's line: label n events want t0.
finish() {
  local label=$1 n=$2 events=$3 want=$4 t0=$5 got=0 before=-1 still=0 s last dup bad secs
  while [ "$got" -lt "$want" ] && [ "$still" -lt 300 ]; do
    got=$(count)
    if [ "$got" = "$before" ]; then still=$((still + 1)); else still=0; before=$got; fi
    sleep 0.1
  done
  sleep 1 # anything late would show as a duplicate
  s=$(stat)
  last=$(echo "$s" | jfield last_unix_ms)
  got=$(echo "$s" | jfield delivered); dup=$(echo "$s" | jfield duplicates); bad=$(echo "$s" | jfield bad_signatures)
  secs=$(python3 -c "print(($last - $t0) / 1000)")
  printf '%-8s %3s endpoints/org: %6s events -> %7s deliveries in %6.2f s = %7.0f deliveries/s  lost %s dup %s bad-sig %s\n' \
    "$label" "$n" "$events" "$got" "$secs" "$(python3 -c "print($got / $secs)")" "$((want - got))" "$dup" "$bad"
}

# Public path: $1 endpoints, $2 deliveries (two events per order).
orders_phase() {
  local n=$1 want=$2 label=${3:-orders} orders t0 out
  orders=$((want / n / 2))
  echo "${ORG[o$n]}" >"$WORK/orgs"
  curl -fs -X POST localhost:9900/reset >/dev/null
  t0=$(date +%s%3N)
  out=$("$BIN/order-load" http://127.0.0.1:8090 "$TOKEN" "$WORK/orgs" "$orders" "$CLIENTS" 0)
  finish "$label" "$n" "$((orders * 2))" "$((orders * 2 * n))" "$t0"
  printf '         %s orders by %s clients: %s orders/s, answered p50 %s ms p99 %s ms\n' \
    "$(kfield "$out" orders)" "$CLIENTS" "$(kfield "$out" orders/s)" "$(kfield "$out" p50_ms)" "$(kfield "$out" p99_ms)"
}

# Straight into the stream: $1 endpoints, $2 deliveries.
direct_phase() {
  local n=$1 want=$2 events t0
  events=$((want / n))
  echo "${ORG[d$n]}" >"$WORK/orgs"
  curl -fs -X POST localhost:9900/reset >/dev/null
  t0=$(date +%s%3N)
  "$BIN/webhook-bench" publish "$NATS" "$PREFIX" "$WORK/orgs" "$events" 0 >"$WORK/pub.log"
  finish direct "$n" "$events" "$((events * n))" "$t0"
}

echo "webhooks: $(nproc) cores, $(date -u +%FT%TZ), $TOTAL deliveries per saturated phase, $CLIENTS ordering clients"
echo "$BENCH_PG_SAYS"
if [ -n "$SVIX" ]; then
  svix_start
  for n in $FANOUTS; do svix_setup "$n" "svix $n"; done
  svix_receiver_start
  echo "$SVIX_SAYS"
else
  echo "svix: not measured (SVIX_SERVER names no svix-server binary)"
fi
# Warm-up (not reported): connections, caches, the consumers.
# 200 orders' worth of deliveries at the first fan-out, however wide.
first=${FANOUTS%% *}
echo "${ORG[o$first]}" >"$WORK/orgs"
"$BIN/order-load" http://127.0.0.1:8090 "$TOKEN" "$WORK/orgs" $((200 / first + 1)) 8 0 >/dev/null
sleep 2

echo "-- public path: orders -> outbox -> stream -> deliveries; Svix through its API after each"
for n in $FANOUTS; do
  orders_phase "$n" "$TOTAL"
  [ -n "$SVIX" ] && svix_phase "$n" "$TOTAL" "$CLIENTS"
done
echo "CPU time so far: $(cpu)"

# Before the sustained phases, on the same small tables as the public phases.
echo "-- second figure, not the public path: events published straight into the stream"
for n in $FANOUTS; do direct_phase "$n" "$TOTAL"; done

if [ "$SUSTAINED" -gt 0 ]; then
echo "-- sustained: three phases of $SUSTAINED deliveries back to back, 50 endpoints, public path"
for i in 1 2 3; do
  orders_phase 50 "$SUSTAINED" "sustain$i"
  echo "         rows: $(q "SELECT 'deliveries ' || (SELECT count(*) FROM webhook_dispatcher.deliveries) || ', outcomes ' || (SELECT count(*) FROM webhook_dispatcher.outcomes) || ', queue ' || (SELECT count(*) FROM webhook_dispatcher.queue) || ', queue dead tuples ' || (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'webhook_dispatcher.queue'::regclass) || ', queue autovacuums ' || (SELECT autovacuum_count FROM pg_stat_user_tables WHERE relid = 'webhook_dispatcher.queue'::regclass)")"
done
echo "CPU time so far: $(cpu)"
fi

if [[ " $FANOUTS " == *" 1 "* ]]; then
echo "${ORG[o1]}" >"$WORK/orgs"
curl -fs -X POST localhost:9900/reset >/dev/null
out=$("$BIN/order-load" http://127.0.0.1:8090 "$TOKEN" "$WORK/orgs" 2500 "$CLIENTS" 250)
want=5000
for _ in $(seq 1 300); do [ "$(count)" -ge "$want" ] && break; sleep 0.1; done
sleep 1
s=$(stat)
printf 'latency at 500 events/s (250 orders/s, 1 endpoint, %s events), from each event'"'"'s commit: p50 %.1f ms  p99 %.1f ms  max %.1f ms  delivered %s dup %s bad-sig %s\n' \
  "$want" "$(echo "$s" | jfield p50_ms)" "$(echo "$s" | jfield p99_ms)" "$(echo "$s" | jfield max_ms)" \
  "$(echo "$s" | jfield delivered)" "$(echo "$s" | jfield duplicates)" "$(echo "$s" | jfield bad_signatures)"
fi

echo "CPU time in all: $(cpu)"
