#!/usr/bin/env bash
# Benchmark of the hottest paths, beside reference routes in the same run:
#   bare actix JSON route | one-PK-SELECT route | GET /v1/auth/me via gateway (warm
#   cache) | GET /v1/profile via gateway (gateway -> identity -> one read)
# plus idle RSS of each service and cold start of the stack.
# The four routes run in turn, ROUNDS times (default 3): on this machine the
# bare route alone moves 20-30% between minutes, so each ratio is taken over
# rounds that alternate (sums of requests over the same minutes) rather than
# over one stretch of each; every round's figures are printed too, with the CPU
# time per request of the process that answered wrk (the reference binary or
# the gateway; identity's and wrk's own are not read here).
# Usage: [ROUNDS=3] scripts/bench-auth.sh [duration of each wrk run, default 10s].
# Needs wrk (installed if missing).
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
"$BIN/baseline" 8099 "postgres://postgres@$PG/$DB" >/tmp/bench-baseline.log 2>&1 & pids+=($!); BASE_PID=$!
wait_http http://127.0.0.1:8099/bare

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
  -d '{"email":"bench@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
  -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
curl -fs localhost:8080/v1/auth/me -H "authorization: Bearer $TOKEN" >/dev/null
sleep 1
IDLE_ID=$(rss_mb "$ID_PID"); IDLE_GW=$(rss_mb "$GW_PID"); IDLE_OB=$(rss_mb "$OB_PID")

HZ=$(getconf CLK_TCK)
cpu_s() { awk -v hz="$HZ" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / hz }' "/proc/$1/stat"; }
declare -A REQS=() CPU=()
run() { # name url header key pid-of-the-front-process its-name
  local out before after
  before=$(cpu_s "$5")
  if [ -n "$3" ]; then out=$(wrk -t2 -c64 -d"$DUR" --latency -H "$3" "$2"); else out=$(wrk -t2 -c64 -d"$DUR" --latency "$2"); fi
  after=$(cpu_s "$5")
  local rps p99 errs n
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  printf '%-30s %10s req/s  p99 %-8s non-2xx %-3s %s %.1f us CPU/request\n' \
    "$1" "$rps" "$p99" "${errs:-0}" "$6" "$(echo "$before $after $n" | awk '{print ($2 - $1) * 1e6 / $3}')"
  REQS[$4]=$(( ${REQS[$4]:-0} + n ))
  CPU[$4]=$(echo "${CPU[$4]:-0} $before $after" | awk '{print $1 + $3 - $2}')
}
ROUNDS=${ROUNDS:-3}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "ROUNDS must be a whole number of at least 1"; exit 2; }
echo "wrk -t2 -c64 -d$DUR per route, $ROUNDS rounds of the four in turn, $(nproc) cores, $(date -u +%FT%TZ)"
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r"
  run "bare actix JSON route" http://127.0.0.1:8099/bare "" BARE "$BASE_PID" baseline
  run "one-PK-SELECT route" http://127.0.0.1:8099/select "" SELECT "$BASE_PID" baseline
  run "GET /v1/auth/me via gateway" http://127.0.0.1:8080/v1/auth/me "authorization: Bearer $TOKEN" ME "$GW_PID" gateway
  run "GET /v1/profile via gateway" http://127.0.0.1:8080/v1/profile "authorization: Bearer $TOKEN" PROFILE "$GW_PID" gateway
done
python3 - "${REQS[BARE]}" "${REQS[SELECT]}" "${REQS[ME]}" "${REQS[PROFILE]}" "${CPU[BARE]}" "${CPU[ME]}" <<'PY'
import sys
bare, sel, me, prof, cpu_bare, cpu_me = map(float, sys.argv[1:])
print(f"over all rounds (requests served in the same minutes):")
print(f"/v1/auth/me  = {me/bare:.0%} of bare   (target >= 90%)")
print(f"/v1/profile  = {prof/sel:.0%} of select (target >= 70%)")
print(f"CPU per request: bare route {cpu_bare*1e6/bare:.1f} us, gateway on /v1/auth/me {cpu_me*1e6/me:.1f} us")
PY
echo "idle RSS: identity ${IDLE_ID} MB, org-billing ${IDLE_OB} MB, core-api-gateway ${IDLE_GW} MB (target < 30 MB each)"
echo "cold start (all services, exec to every /healthz answering): ${COLD_MS} ms (target < 3000 ms)"
echo "RSS after load: identity $(rss_mb "$ID_PID") MB, core-api-gateway $(rss_mb "$GW_PID") MB"
