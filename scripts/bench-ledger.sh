#!/usr/bin/env bash
# Credits per second on one hot wallet (CLIENTS concurrent clients through the
# gateway, 8 by default), beside pgbench updating one hot row with as many
# clients, in the same run; then proof that no credit was lost (balance = sum of
# ledger rows = accepted requests).
# Usage: [CLIENTS=64] [STACK=own|running] scripts/bench-ledger.sh [duration, default 10s].
# STACK=running measures the stack `make run` started (devstack, one process,
# its database HUB_DB, default hub) instead of starting the three services.
# Needs wrk and pgbench.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
C=${CLIENTS:-8}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PGH=${PGHOST:-127.0.0.1}; PGP=${PGPORT:-5432}
DB=hub_bench_ledger
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
STACK=${STACK:-own}
q() { psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -Atqc "$1"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 500); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done; echo "no answer from $1"; exit 1; }

if [ "$STACK" = running ]; then
  DB=${HUB_DB:-hub}
  wait_http http://127.0.0.1:8080/healthz
  echo "stack: the one \`make run\` started (devstack, database $DB; its own logging settings)"
  q "DROP TABLE IF EXISTS hot"
else
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p identity -p org-billing -p core-api-gateway --bins
psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null
psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $DB"

. scripts/lib/bench-three.sh
bench_three_env "$PGH:$PGP" "$DB" benchl
"$BIN/identity" >/tmp/benchl-identity.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8081/healthz
"$BIN/org-billing" >/tmp/benchl-billing.log 2>&1 & pids+=($!)
"$BIN/core-api-gateway" >/tmp/benchl-gateway.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8082/healthz
wait_http http://127.0.0.1:8080/healthz
fi

signin() {
  local dev
  dev=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
    -H "x-forwarded-for: $2" -d "{\"email\":\"$1\"}" | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
  curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' -H "x-forwarded-for: $2" \
    -d "{\"token\":\"$dev\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/'
}
# A fresh owner each run (a running stack keeps its organizations).
OWNER=$(signin "owner-$(date +%s%N)@example.com" 198.51.100.1)
STAFF=$(signin staff@example.com 198.51.100.2)
ORG=$(curl -fs localhost:8080/v1/organizations -H "authorization: Bearer $OWNER" \
  -H 'content-type: application/json' -d '{"name":"Hot","legal_type":"corporate","country":"TR"}' |
  sed -E 's/.*"id":"([^"]+)".*/\1/')

# pgbench on one hot row, $C clients: run before the credits and again after
# them (this machine's rate moves between runs); a CHECKPOINT before every
# phase so that no phase pays for another's dirty pages.
q "CREATE TABLE hot (id int PRIMARY KEY, v bigint NOT NULL); INSERT INTO hot VALUES (1, 0);"
pgs=$(mktemp --suffix .sql); echo 'UPDATE hot SET v = v + 1 WHERE id = 1;' >"$pgs"
secs=${DUR%s}
pgbench_hot() {
  q "CHECKPOINT"
  pgbench -h "$PGH" -p "$PGP" -U postgres -n -c"$C" -j2 -T "$secs" -f "$pgs" "$DB" 2>/dev/null |
    awk '/^tps/ {print $3; exit}'
}
tps_before=$(pgbench_hot)

lua=$(mktemp --suffix .lua)
cat >"$lua" <<LUA
wrk.method = "POST"
wrk.body   = '{"amount_minor": 1, "note": "bench"}'
wrk.headers["content-type"] = "application/json"
wrk.headers["authorization"] = "Bearer $STAFF"
LUA
echo "$C clients, $DUR each, $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-44s %10s /s\n' "pgbench one hot row (-c$C -j2), before" "$tps_before"
q "CHECKPOINT"
out=$(wrk -t2 -c"$C" -d"$DUR" --latency -s "$lua" "http://127.0.0.1:8080/v1/organizations/$ORG/wallet/credit")
rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
total=$(echo "$out" | awk '/requests in/ {print $1}')
non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}'); non2xx=${non2xx:-0}
p99=$(echo "$out" | awk '$1=="99%" {print $2}')
printf '%-44s %10s /s   p99 %s   (%s requests, %s non-2xx)\n' "wallet credits via gateway (wrk -c$C)" "$rps" "$p99" "$total" "$non2xx"
if [ -n "${BENCH_CPU:-}" ]; then
  echo "CPU seconds so far:"; ps -eo comm,cputime --sort=-cputime | head -12
fi

# No leg straight at org-billing any more: every assertion is single-use and
# bound to its body, so a load generator replaying one signed header gets 401s
# (as it should). The target is measured through the gateway above.

SCHEMA_SET="SET search_path TO org_billing;"
balance=$(q "$SCHEMA_SET SELECT balance_minor FROM wallets WHERE org_id = '$ORG'")
ledger=$(q "$SCHEMA_SET SELECT COALESCE(sum(delta_minor), 0) FROM wallet_transactions WHERE org_id = '$ORG'")
rows=$(q "$SCHEMA_SET SELECT count(*) FROM wallet_transactions WHERE org_id = '$ORG'")

# Let the event pipeline drain (relay -> NATS -> identity's audit consumer) so that
# it does not steal from pgbench, and check that every credit's audit event arrived.
audited=0
for _ in $(seq 1 600); do
  audited=$(q "SELECT count(*) FROM identity.audit_log WHERE action = 'wallet.credited' AND org_id = '$ORG'")
  [ "$audited" -ge "$rows" ] && break
  sleep 0.1
done
echo "audit events stored by identity: $audited of $rows"

tps_after=$(pgbench_hot)
printf '%-44s %10s /s\n' "pgbench one hot row (-c$C -j2), after" "$tps_after"
python3 - "$rps" "$tps_before" "$tps_after" <<'PY'
import sys
rps, before, after = map(float, sys.argv[1:])
lo, hi = min(before, after), max(before, after)
print(f"ratio credits/pgbench via gateway {rps/hi:.2f}-{rps/lo:.2f} "
      f"(against the faster and the slower pgbench run; target >= 4)")
PY
accepted=$((total - non2xx))
echo "wallet balance $balance, ledger sum $ledger, ledger rows $rows, accepted requests $accepted"
if [ "$balance" = "$ledger" ] && [ "$ledger" = "$rows" ] && [ "$rows" -ge "$accepted" ]; then
  echo "no update lost: balance = sum of rows = one row per accepted credit"
else
  echo "MISMATCH"; exit 1
fi
rm -f "$lua" "$pgs"
