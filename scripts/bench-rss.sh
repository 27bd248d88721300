#!/usr/bin/env bash
# Memory under steady load (issue 33): identity, org-billing and the gateway as
# separate processes with production logging, driven by wrk in alternating
# rounds over two routes (GET /v1/profile, a read in identity; GET
# /v1/organizations/{id}, a read in org-billing; the gateway serves both), and
# the resident memory (VmRSS) of each process sampled once it has served FIRST
# requests of its own and again once it has served TOTAL. Flat means within 10%.
# The rounds never change while the run lasts (a service that has served TOTAL
# goes on being asked): each service's request rate stays what it was, since
# memory that follows the rate (the assertion replay set is sized by its last
# window) would otherwise grow when the other service stops and its own rate
# doubles. Keep the machine otherwise idle for the same reason.
# Usage: [NO_BUILD=1] scripts/bench-rss.sh [requests per service, default 5000000]
#        [ROUND=3s] [FIRST=1000000]. Needs wrk. Stop `make run` first (same ports).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-5000000}
FIRST=${FIRST:-1000000}
ROUND=${ROUND:-3s}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PG=${PGHOST:-127.0.0.1}:${PGPORT:-5432}
DB=hub_bench_rss
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p identity -p org-billing -p core-api-gateway --bins
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "CREATE DATABASE $DB"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 500); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done; echo "no answer from $1"; exit 1; }

. scripts/lib/bench-three.sh
bench_three_env "$PG" "$DB" benchr
"$BIN/identity" >/dev/null 2>&1 & pids+=($!); ID_PID=$!
wait_http http://127.0.0.1:8081/healthz
"$BIN/org-billing" >/dev/null 2>&1 & pids+=($!); OB_PID=$!
"$BIN/core-api-gateway" >/dev/null 2>&1 & pids+=($!); GW_PID=$!
wait_http http://127.0.0.1:8082/healthz
wait_http http://127.0.0.1:8080/healthz

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
  -d '{"email":"rss@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
  -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
ORG=$(curl -fs localhost:8080/v1/organizations -H "authorization: Bearer $TOKEN" \
  -H 'content-type: application/json' -d '{"name":"Steady","legal_type":"corporate","country":"TR"}' |
  sed -E 's/.*"id":"([^"]+)".*/\1/')
for u in /v1/auth/me /v1/profile "/v1/organizations/$ORG"; do
  curl -fs "localhost:8080$u" -H "authorization: Bearer $TOKEN" >/dev/null || { echo "GET $u failed"; exit 1; }
done

echo "wrk -t2 -c64 in rounds of $ROUND, $(nproc) cores, $(date -u +%FT%TZ)"
echo "each service sampled once it has served $FIRST requests and again once it has served $TOTAL"
echo "(the gateway serves every request; identity the profile reads; org-billing the organization reads)"
printf '%-22s %10s %10s %10s\n' "requests (id/ob/gw)" identity org-billing gateway
sample() { printf '%-22s %7s MB %7s MB %7s MB\n' "$1" "$(rss_mb $ID_PID)" "$(rss_mb $OB_PID)" "$(rss_mb $GW_PID)"; }
sample 0
n_id=0 n_ob=0 n_gw=0 errors=0
declare -A first=() last=()
round() { # route -> requests answered
  local out e
  out=$(wrk -t2 -c64 -d"$ROUND" -H "authorization: Bearer $TOKEN" "http://127.0.0.1:8080$1")
  e=$(echo "$out" | awk '/Non-2xx/ {print $NF}'); errors=$((errors + ${e:-0}))
  echo "$out" | awk '/requests in/ {print $1}' >"$WORKF"
}
WORKF=$(mktemp)
while [ -z "${last[id]:-}" ] || [ -z "${last[ob]:-}" ] || [ -z "${last[gw]:-}" ]; do
  round /v1/profile; n=$(cat "$WORKF"); n_id=$((n_id + n)); n_gw=$((n_gw + n))
  round "/v1/organizations/$ORG"; n=$(cat "$WORKF"); n_ob=$((n_ob + n)); n_gw=$((n_gw + n))
  sampled=
  for s in id ob gw; do
    v="n_$s"
    case $s in id) pid_v=ID_PID ;; ob) pid_v=OB_PID ;; gw) pid_v=GW_PID ;; esac
    if [ -z "${first[$s]:-}" ] && [ "${!v}" -ge "$FIRST" ]; then
      first[$s]=$(rss_mb "${!pid_v}"); sampled=1
    elif [ -n "${first[$s]:-}" ] && [ -z "${last[$s]:-}" ] && [ "${!v}" -ge "$TOTAL" ]; then
      last[$s]=$(rss_mb "${!pid_v}"); sampled=1
    fi
  done
  [ -z "$sampled" ] || sample "$n_id/$n_ob/$n_gw"
done
rm -f "$WORKF"
echo "non-2xx answers: $errors"
python3 - "${first[id]} ${first[ob]} ${first[gw]}" "${last[id]} ${last[ob]} ${last[gw]}" <<'PY'
import sys
first, last = (list(map(float, a.split())) for a in sys.argv[1:])
ok = True
for name, a, b in zip(["identity", "org-billing", "gateway"], first, last):
    growth = (b - a) / a
    ok &= abs(growth) <= 0.10
    print(f"{name:12} {a:7.1f} MB -> {b:7.1f} MB ({growth:+.1%})")
print("flat (within 10%): " + ("yes" if ok else "NO"))
PY
