#!/usr/bin/env bash
# The console's pages under load (issue 36), beside the API call they make, in
# the same run, with production logging (scripts/lib/bench-logging.sh; LOG=off
# for the labelled second figure): the whole dev stack (devstack, release) with
# the console in front of the gateway; USERS people signed in through the
# console, each loading their organization's page (GET /orgs/{id}: one API
# call behind it) for DUR seconds, and the same people making that API call
# themselves for DUR seconds, alternated in halves after a warm-up
# (tests-e2e/src/bin/page-load.rs). Targets: page p99 < 50 ms at 32 users;
# the console adds < 2 ms.
# Usage: scripts/bench-console.sh [seconds, default 10] [users, default 32]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
USERS=${2:-32}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PG=${PGHOST:-127.0.0.1}:${PGPORT:-5432}
DB=hub_bench_console
cargo build --release -q -p hub-stack --bin devstack
cargo build --release -q -p tests-e2e --bin page-load
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "CREATE DATABASE $DB"

pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 1500); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done; echo "no answer from $1"; exit 1; }

export HUB_PROFILE=dev
PREFIXES=(IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY CONSOLE)
. scripts/lib/bench-logging.sh
bench_logging "${PREFIXES[@]}"
for p in "${PREFIXES[@]}"; do
  export "${p}__NATS__STREAM_SUFFIX=_bench_console" "${p}__NATS__SUBJECT_PREFIX=bench_console."
done
export HUB_DATABASE_URL="postgres://postgres@$PG/$DB"
"$BIN/devstack" >/tmp/bench-console-stack.log 2>&1 & pid=$!
wait_http http://127.0.0.1:8080/healthz
wait_http http://127.0.0.1:8070/healthz
echo "scripts/bench-console.sh $DUR $USERS ($(nproc) cores; the stack, the console and the load share them)"
"$BIN/page-load" http://127.0.0.1:8070 http://127.0.0.1:8080 "$USERS" "$DUR"
