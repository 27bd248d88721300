#!/usr/bin/env bash
# Drop the databases and streams that ended test runs left behind (hubtest_*,
# CORE_t*, ...), and only theirs: a run still going (another `make test` on the
# same Postgres and NATS) holds its lock and keeps everything. See
# tests-e2e/src/runs.rs. `--dry-run` lists what would go.
set -euo pipefail
cd "$(dirname "$0")/.."
export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/postgres}
export TEST_NATS_URL=${TEST_NATS_URL:-nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}}
exec cargo run -q -p tests-e2e --bin clean-test-runs -- "$@"
