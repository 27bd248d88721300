#!/usr/bin/env bash
# Benchmark of the assistant's rule-based read-only path through the gateway,
# beside GET /v1/profile in the same run (same stack, same user):
#   GET  /v1/profile                       gateway -> identity -> one read
#   POST /v1/agent "show my profile"       gateway -> agent (match, identity's
#                                           GET /v1/profile as the user, one
#                                           transaction storing the exchange)
#   POST /v1/agent "how many AI tokens does <org> have"
#                                           gateway -> agent (org lookup and the
#                                           tokens route at org-billing, store)
# wrk -t2 -c64; reports each throughput, p99, and agent/profile. Target: the
# agent at least 25% of /v1/profile, p99 under 50 ms.
# Usage: scripts/bench-agent.sh [duration, default 10s]. Needs wrk (installed if
# missing). Runs the whole stack (devstack, release build) on its own database
# and NATS prefix; stop `make run` first (same ports).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PGH=${PGHOST:-127.0.0.1}; PGP=${PGPORT:-5432}
DB=hub_bench_agent
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release -q -p hub-stack --bin devstack
psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $DB"

pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -f /tmp/bench-agent-*.lua; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 600); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "no answer from $1"; exit 1; }

export HUB_PROFILE=dev
. scripts/lib/bench-logging.sh
bench_logging IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY
export HUB_DATABASE_URL="postgres://postgres@$PGH:$PGP/$DB"
for svc in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY; do
  export "${svc}__NATS__SUBJECT_PREFIX=benchagent." "${svc}__NATS__STREAM_SUFFIX=_benchagent"
done
"$BIN/devstack" >/tmp/bench-agent-stack.log 2>&1 & pid=$!
wait_http http://127.0.0.1:8080/healthz
wait_http http://127.0.0.1:8086/healthz

signin() {
  local dev
  dev=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
    -d "{\"email\":\"$1\"}" | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
  curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
    -d "{\"token\":\"$dev\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/'
}
TOKEN=$(signin bench-agent@example.com)
curl -fs localhost:8080/v1/organizations -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d '{"name":"Bench Agent GmbH","legal_type":"corporate","country":"DE"}' >/dev/null
sleep 1
# The agent answers by its rules here (no provider in the dev profile).
curl -fs localhost:8080/v1/agent -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d '{"message":"how many AI tokens does Bench Agent GmbH have"}' | grep -q '"engine":"rules"' \
  || { echo "the agent did not answer by its rules"; exit 1; }

post_script() { # file message
  cat >"$1" <<LUA
wrk.method = "POST"
wrk.body = '{"message":"$2"}'
wrk.headers["content-type"] = "application/json"
wrk.headers["authorization"] = "Bearer $TOKEN"
LUA
}
post_script /tmp/bench-agent-profile.lua "show my profile"
post_script /tmp/bench-agent-tokens.lua "how many AI tokens does Bench Agent GmbH have"

run() { # label var wrk-args...
  local label=$1 var=$2; shift 2
  local out rps p99 errs
  out=$(wrk -t2 -c64 -d"$DUR" --latency "$@")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf '%-44s %10s req/s   p99 %-9s non-2xx %s\n' "$label" "$rps" "$p99" "${errs:-0}"
  eval "RPS_$var=$rps; P99_$var=$p99"
}
echo "wrk -t2 -c64 -d$DUR, $(nproc) cores, $(date -u +%FT%TZ)"
# Warm-up of every path, then measured runs.
wrk -t2 -c64 -d2s -s /tmp/bench-agent-profile.lua http://127.0.0.1:8080/v1/agent >/dev/null
run "GET /v1/profile via gateway" PROFILE -H "authorization: Bearer $TOKEN" http://127.0.0.1:8080/v1/profile
run "POST /v1/agent 'show my profile'" AGENT_PROFILE -s /tmp/bench-agent-profile.lua http://127.0.0.1:8080/v1/agent
run "POST /v1/agent 'how many AI tokens ...'" AGENT_TOKENS -s /tmp/bench-agent-tokens.lua http://127.0.0.1:8080/v1/agent
run "GET /v1/profile via gateway (again)" PROFILE2 -H "authorization: Bearer $TOKEN" http://127.0.0.1:8080/v1/profile
python3 - "$RPS_PROFILE" "$RPS_PROFILE2" "$RPS_AGENT_PROFILE" "$RPS_AGENT_TOKENS" "$P99_AGENT_PROFILE" "$P99_AGENT_TOKENS" <<'PY'
import sys
p1, p2, ap, at = map(float, sys.argv[1:5])
prof = (p1 + p2) / 2
print(f"agent 'show my profile'      = {ap/prof:.0%} of /v1/profile (mean of the two runs; target >= 25%), p99 {sys.argv[5]} (target < 50ms)")
print(f"agent 'how many AI tokens'   = {at/prof:.0%} of /v1/profile, p99 {sys.argv[6]}")
PY
CONVS=$(psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -Atc "select count(*) from agent.conversations")
echo "conversations stored: $CONVS (one per answered request)"
