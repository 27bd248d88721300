#!/usr/bin/env bash
# Every test (unit, integration against real Postgres and NATS, end-to-end, the
# documentation's examples), the
# offline chart and docs checks, then one closing line that sums all test binaries.
set -uo pipefail
cd "$(dirname "$0")/.."
export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/postgres}
export TEST_NATS_URL=${TEST_NATS_URL:-nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}}
# The console's browser tests write a screenshot of every page they check here,
# for CI to keep (this run's only: earlier ones are removed).
export CONSOLE_SCREENSHOTS=${CONSOLE_SCREENSHOTS:-$PWD/ci-artifacts/console-screenshots}
rm -rf "$CONSOLE_SCREENSHOTS"
mkdir -p "$CONSOLE_SCREENSHOTS"
log=$(mktemp)
cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee "$log"
tests_rc=${PIPESTATUS[0]}
# --all-targets leaves the documentation's examples out: they run here.
cargo test --workspace --doc --no-fail-fast 2>&1 | tee -a "$log"
doc_rc=${PIPESTATUS[0]}
[ "$doc_rc" = 0 ] || tests_rc=$doc_rc
scripts/helm-check.sh
checks_rc=$?
read -r passed failed < <(awk '/^test result:/ {p += $4; f += $6} END {print p+0, f+0}' "$log")
rm -f "$log"
echo "tests: ${passed} passed, ${failed} failed"
echo "console screenshots: $(find "$CONSOLE_SCREENSHOTS" -name '*.png' | wc -l) in $CONSOLE_SCREENSHOTS"
[ "$tests_rc" = 0 ] && [ "$checks_rc" = 0 ]
