#!/usr/bin/env bash
# Webhook delivery benchmark, everything on this machine in one run:
#   saturated end-to-end throughput (events committed to the PRODUCT stream ->
#   deliveries acknowledged by a local receiver answering 200 at once) with 1,
#   10 and 100 endpoints per organization, then latency from an event's commit
#   to its delivery paced at 500 events/s. The receiver checks both signatures
#   and counts lost, duplicated and badly signed deliveries.
# Postgres: a cluster of the benchmark's own with production's defaults
# (autovacuum on), or BENCH_PG=shared to use PGHOST/PGPORT if it is configured
# so (scripts/lib/bench-postgres.sh); the output says which.
# Usage: [BENCH_PG=own|shared] scripts/bench-webhooks.sh [deliveries per phase, default 20000]
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-20000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
. scripts/lib/bench-postgres.sh
DB=hub_bench_webhooks
NATS=nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}
PREFIX=benchwh.
WORK=$(mktemp -d)
cargo build --release -q -p hub-stack --bin devstack
cargo build --release -q -p tests-e2e --bin webhook-bench

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; bench_postgres_stop; rm -rf "$WORK"; }
trap cleanup EXIT
bench_postgres_start
psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null
psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $DB"

export HUB_PROFILE=dev RUST_LOG=warn HUB_DATABASE_URL="postgres://postgres@$PGH:$PGP/$DB" HUB_NATS_URL="$NATS"
# 100 endpoints in one organization (the default cap is 20).
export WEBHOOK_DISPATCHER__WEBHOOKS__MAX_ENDPOINTS_PER_ORG=100
for svc in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER CORE_API_GATEWAY; do
  export "${svc}__NATS__SUBJECT_PREFIX=$PREFIX" "${svc}__NATS__STREAM_SUFFIX=_benchwh" "${svc}__NATS__MEMORY_STORAGE=true"
  export "${svc}__TELEMETRY__LOG_FORMAT=json"
done
"$BIN/devstack" >"$WORK/stack.log" 2>&1 & pids+=($!)
for _ in $(seq 1 300); do curl -fs localhost:8085/healthz >/dev/null 2>&1 && curl -fs localhost:8090/healthz >/dev/null 2>&1 && break; sleep 0.1; done

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' -d '{"email":"bench-hooks@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
: >"$WORK/secrets"
idx=0
declare -A ORG
for n in 1 10 100; do
  org=$(curl -fs localhost:8090/core-api/v1/organizations -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
        -d "{\"name\":\"Bench $n\",\"legal_type\":\"corporate\",\"country\":\"TR\"}" | sed -E 's/.*"id":"([^"]+)".*/\1/')
  ORG[$n]=$org
  for _ in $(seq 1 "$n"); do
    secret=$(curl -fs localhost:8090/v1/webhooks -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
             -d "{\"org_id\":\"$org\",\"url\":\"http://127.0.0.1:9900/r/$idx\"}" | sed -E 's/.*"secret":"([^"]+)".*/\1/')
    echo "$secret" >>"$WORK/secrets"; idx=$((idx + 1))
  done
done
"$BIN/webhook-bench" receive 9900 "$WORK/secrets" >"$WORK/receiver.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -fs localhost:9900/stats >/dev/null 2>&1 && break; sleep 0.05; done

cpu() { ps -o comm=,time= -p "$(pgrep -d, -f 'release/devstack|webhook-bench receive|nats-server|postgres')" 2>/dev/null | awk '{a[$1]=$2} END {for (k in a) printf "%s=%s ", k, a[k]}'; }
stat() { curl -fs localhost:9900/stats; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

echo "webhooks: $(nproc) cores, $(date -u +%FT%TZ), $TOTAL deliveries per saturated phase"
echo "$BENCH_PG_SAYS"
for n in 1 10 100; do
  events=$((TOTAL / n))
  echo "${ORG[$n]}" >"$WORK/orgs"
  curl -fs -X POST localhost:9900/reset >/dev/null
  t0=$(date +%s%3N)
  "$BIN/webhook-bench" publish "$NATS" "$PREFIX" "$WORK/orgs" "$events" 0 >"$WORK/pub.log"
  want=$((events * n))
  for _ in $(seq 1 1200); do
    got=$(stat | field delivered); [ "$got" -ge "$want" ] && break; sleep 0.1
  done
  sleep 1
  s=$(stat)
  last=$(echo "$s" | field last_unix_ms)
  got=$(echo "$s" | field delivered); dup=$(echo "$s" | field duplicates); bad=$(echo "$s" | field bad_signatures)
  secs=$(python3 -c "print(($last - $t0) / 1000)")
  printf '%3s endpoints/org: %6s events -> %6s deliveries in %6.2f s = %7.0f deliveries/s  lost %s dup %s bad-sig %s  (%s)\n' \
    "$n" "$events" "$got" "$secs" "$(python3 -c "print($got / $secs)")" "$((want - got))" "$dup" "$bad" "$(cat "$WORK/pub.log")"
done
echo "CPU time so far: $(cpu)"

echo "${ORG[1]}" >"$WORK/orgs"
curl -fs -X POST localhost:9900/reset >/dev/null
"$BIN/webhook-bench" publish "$NATS" "$PREFIX" "$WORK/orgs" 5000 500 >"$WORK/pub.log"
sleep 2
s=$(stat)
printf 'latency at 500 events/s (1 endpoint, 5000 events): p50 %.1f ms  p99 %.1f ms  max %.1f ms  delivered %s dup %s bad-sig %s\n' \
  "$(echo "$s" | field p50_ms)" "$(echo "$s" | field p99_ms)" "$(echo "$s" | field max_ms)" \
  "$(echo "$s" | field delivered)" "$(echo "$s" | field duplicates)" "$(echo "$s" | field bad_signatures)"
