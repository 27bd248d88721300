#!/usr/bin/env bash
# Svix's open-source server (svix-server) measured on its own, the way
# scripts/bench-webhooks.sh measures our dispatcher: saturated end-to-end
# delivery throughput (messages POSTed to its authenticated API by concurrent
# clients -> deliveries acknowledged by a local receiver answering 200 at
# once) with 1, 10, 50 and 100 endpoints per application, the same number of
# deliveries in every phase. The receiver checks the Standard Webhooks
# signature and counts lost, duplicated and badly signed deliveries; each line
# also gives the CPU seconds Svix, its Redis and Postgres used in the phase.
# Svix is not built here: SVIX_SERVER names a svix-server binary built from
# its repository; without it this says so and exits 0. How it is run and
# configured: scripts/lib/bench-svix.sh. Postgres: as bench-webhooks.sh
# (scripts/lib/bench-postgres.sh).
# Usage: SVIX_SERVER=/path/to/svix-server [SVIX_CLIENTS=64] [BENCH_PG=own|shared] \
#          scripts/bench-svix.sh [deliveries per phase, default 20000]
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-20000}
CLIENTS=${SVIX_CLIENTS:-64}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
. scripts/lib/bench-postgres.sh
. scripts/lib/bench-svix.sh
# Unset: nothing to measure (exit 0); set to something else than a binary: fail.
svix_available || { rc=$?; [ "$rc" = 1 ] && exit 0; exit "$rc"; }
cargo build --release -q -p tests-e2e --bin webhook-bench --bin svix-bench

WORK=$(mktemp -d)
cleanup() { svix_stop; bench_postgres_stop; rm -rf "$WORK"; }
trap cleanup EXIT
bench_postgres_start
SVIX_SECRETS=$WORK/secrets
svix_start
for n in 1 10 50 100; do svix_setup "$n" "bench $n endpoints"; done
svix_receiver_start

echo "svix webhooks: $(nproc) cores, $(date -u +%FT%TZ), $TOTAL deliveries per phase, $CLIENTS API clients"
echo "$BENCH_PG_SAYS"
echo "$SVIX_SAYS"
for n in 1 10 50 100; do
  svix_phase "$n" "$TOTAL" "$CLIENTS"
done
