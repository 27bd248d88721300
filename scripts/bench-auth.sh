#!/usr/bin/env bash
# Benchmark of the hottest paths, beside reference routes in the same run:
#   bare actix JSON route | one-PK-SELECT route | GET /v1/auth/me via gateway (warm
#   cache) | GET /v1/profile via gateway (gateway -> identity -> one read)
# plus idle RSS of each service and cold start of the stack.
# Usage: scripts/bench-auth.sh [duration, default 10s]. Needs wrk (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PG=${PGHOST:-127.0.0.1}:${PGPORT:-5432}
DB=hub_bench
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p identity -p org-billing -p core-api-gateway --bins
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p tests-e2e --bin baseline
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "CREATE DATABASE $DB"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 300); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.01; done; echo "no answer from $1"; exit 1; }
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

. scripts/lib/bench-three.sh
bench_three_env "$PG" "$DB" bench
# First start migrates the new database; the measured cold start is a restart of
# both services from built binaries against an existing schema.
"$BIN/identity" >/tmp/bench-identity.log 2>&1 & pids+=($!)
"$BIN/org-billing" >/tmp/bench-billing.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8081/healthz
wait_http http://127.0.0.1:8082/healthz
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; pids=()

t0=$(date +%s%N)
"$BIN/identity" >>/tmp/bench-identity.log 2>&1 & pids+=($!); ID_PID=$!
"$BIN/org-billing" >>/tmp/bench-billing.log 2>&1 & pids+=($!); OB_PID=$!
"$BIN/core-api-gateway" >/tmp/bench-gateway.log 2>&1 & pids+=($!); GW_PID=$!
wait_http http://127.0.0.1:8081/healthz
wait_http http://127.0.0.1:8082/healthz
wait_http http://127.0.0.1:8080/healthz
wait_http http://127.0.0.1:8090/healthz
t1=$(date +%s%N)
COLD_MS=$(( (t1 - t0) / 1000000 ))
"$BIN/baseline" 8099 "postgres://postgres@$PG/$DB" >/tmp/bench-baseline.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8099/bare

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
  -d '{"email":"bench@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
  -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
curl -fs localhost:8080/v1/auth/me -H "authorization: Bearer $TOKEN" >/dev/null
sleep 1
IDLE_ID=$(rss_mb "$ID_PID"); IDLE_GW=$(rss_mb "$GW_PID"); IDLE_OB=$(rss_mb "$OB_PID")

run() { # name url [header]
  local out
  if [ -n "$3" ]; then out=$(wrk -t2 -c64 -d"$DUR" --latency -H "$3" "$2"); else out=$(wrk -t2 -c64 -d"$DUR" --latency "$2"); fi
  local rps p99 errs
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf '%-34s %12s req/s   p99 %-9s non-2xx %s\n' "$1" "$rps" "$p99" "${errs:-0}"
  eval "RPS_$4=$rps"
}
echo "wrk -t2 -c64 -d$DUR, $(nproc) cores, $(date -u +%FT%TZ)"
run "bare actix JSON route" http://127.0.0.1:8099/bare "" BARE
run "one-PK-SELECT route" http://127.0.0.1:8099/select "" SELECT
run "GET /v1/auth/me via gateway" http://127.0.0.1:8080/v1/auth/me "authorization: Bearer $TOKEN" ME
run "GET /v1/profile via gateway" http://127.0.0.1:8080/v1/profile "authorization: Bearer $TOKEN" PROFILE
python3 - "$RPS_BARE" "$RPS_SELECT" "$RPS_ME" "$RPS_PROFILE" <<'PY'
import sys
bare, sel, me, prof = map(float, sys.argv[1:])
print(f"/v1/auth/me  = {me/bare:.0%} of bare   (target >= 90%)")
print(f"/v1/profile  = {prof/sel:.0%} of select (target >= 70%)")
PY
echo "idle RSS: identity ${IDLE_ID} MB, org-billing ${IDLE_OB} MB, core-api-gateway ${IDLE_GW} MB (target < 30 MB each)"
echo "cold start (all services, exec to every /healthz answering): ${COLD_MS} ms (target < 3000 ms)"
echo "RSS after load: identity $(rss_mb "$ID_PID") MB, core-api-gateway $(rss_mb "$GW_PID") MB"
