#!/usr/bin/env bash
# The whole stack in the foreground, dev profile: core gateway on 127.0.0.1:8080,
# product host on 127.0.0.1:8090, identity on 127.0.0.1:8081. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
DB=${HUB_DB:-hub}
psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc \
  "select 1 from pg_database where datname = '$DB'" | grep -q 1 ||
  psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -qc "CREATE DATABASE \"$DB\""
cargo build --release -p tests-e2e --bin devstack
export HUB_PROFILE=dev
export IDENTITY__DATABASE__URL=${IDENTITY__DATABASE__URL:-postgres://postgres@$PGHOST:$PGPORT/$DB}
export ORG_BILLING__DATABASE__URL=${ORG_BILLING__DATABASE__URL:-postgres://postgres@$PGHOST:$PGPORT/$DB}
NATS_URL="nats://${NATS_HOST:-127.0.0.1}:${NATS_PORT:-4222}"
for svc in IDENTITY ORG_BILLING CORE_API_GATEWAY; do
  var="${svc}__NATS__URL"
  export "$var=${!var:-$NATS_URL}"
done
# Migrations run first, then every service in one process.
"${CARGO_TARGET_DIR:-target}/release/devstack"
