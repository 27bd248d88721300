#!/usr/bin/env bash
# The whole stack in the foreground, dev profile: core gateway on 127.0.0.1:8080,
# product host on 127.0.0.1:8090, the services on their dev ports. Ctrl-C stops it.
# Which services run, and how they are wired, is crates/stack (one description).
set -euo pipefail
cd "$(dirname "$0")/.."
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
DB=${HUB_DB:-hub}
psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc \
  "select 1 from pg_database where datname = '$DB'" | grep -q 1 ||
  psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -qc "CREATE DATABASE \"$DB\""
cargo build --release -p hub-stack --bin devstack
export HUB_PROFILE=dev
# An administrator URL: each service creates and uses its own role on it.
export HUB_DATABASE_URL=${HUB_DATABASE_URL:-postgres://postgres@$PGHOST:$PGPORT/$DB}
export HUB_NATS_URL=${HUB_NATS_URL:-nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}}
exec "${CARGO_TARGET_DIR:-target}/release/devstack"
