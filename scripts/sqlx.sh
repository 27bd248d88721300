#!/usr/bin/env bash
# Compile-time checked SQL: the query macros' offline data in `.sqlx/`.
#
#   scripts/sqlx.sh check     lint the workspace with every query checked against a
#                             database migrated from migrations/, and fail when the
#                             committed `.sqlx/` is not exactly what that produces
#                             (a query changed, added or removed without re-preparing,
#                             or a migration changed what a query returns)
#   scripts/sqlx.sh prepare   the same, then replace `.sqlx/` with the fresh data
#   scripts/sqlx.sh db NAME   (re)make database NAME, migrated, and keep it: for
#                             iterating on one crate with the macros online, e.g.
#     SQLX_OFFLINE=false DATABASE_URL='postgres://postgres@127.0.0.1:5432/NAME?options[search_path]=identity' \
#       cargo check -p identity
#
# Every other build reads `.sqlx/` only (SQLX_OFFLINE=true in .cargo/config.toml):
# no database is needed to build, and the image builds without one.
#
# Each service's queries are unqualified and run with `search_path` pinned to
# its own schema (service_kit::db), so each crate is checked with that
# search_path: a `.env` beside its Cargo.toml (written here, removed on exit;
# sqlx's macros read DATABASE_URL from the crate's `.env`) names the schema.
# The kit's queries (the outbox) run in every service's schema and are checked
# against identity's; every outbox has the same shape (a test in
# tests-e2e/tests/e2e/outbox.rs compares them). tests-e2e qualifies its tables.
#
# The check lints with clippy (the same `-D warnings` as `make lint`), so on a
# fresh clone it costs nothing beyond the lint; sources are touched so that
# every crate's macros run again.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
mode=${1:-check}
case "$mode" in check | prepare | db) ;; *) echo "usage: $0 check|prepare|db NAME" >&2; exit 2 ;; esac

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
ADMIN=${TEST_DATABASE_URL:-postgres://postgres@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/postgres}
base=${ADMIN%/*}
db="hubsqlx_$$_$(date +%s)"
if [ "$mode" = db ]; then
  db=${2:?usage: $0 db NAME}
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null
fi
url="$base/$db"
tmp=$(mktemp -d)
# crate directory -> the schema its queries run in ("" = none pinned).
crates=(
  "crates/kit=identity"
  "services/identity=identity"
  "services/org-billing=org_billing"
  "services/kyc=kyc"
  "services/server-product=server_product"
  "services/webhook-dispatcher=webhook_dispatcher"
  "services/agent=agent"
  "tests-e2e="
)

cleanup() {
  [ "$mode" = db ] && { rm -rf "$tmp"; return; }
  for c in "${crates[@]}"; do rm -f "${c%%=*}/.env"; done
  rm -rf "$tmp"
  psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# The database: every schema, migrated from the same files the services embed.
psql -q -v ON_ERROR_STOP=1 "$ADMIN" -c "CREATE DATABASE \"$db\"" >/dev/null
for dir in migrations/*/; do
  schema=$(basename "$dir")
  psql -q -v ON_ERROR_STOP=1 "$url" -c "CREATE SCHEMA \"$schema\"" >/dev/null
  for f in "$dir"*.sql; do
    # sqlx runs each migration in a transaction unless it starts with
    # `-- no-transaction` (VACUUM FULL cannot run in one).
    single=(--single-transaction)
    head -1 "$f" | grep -q '^-- no-transaction' && single=()
    PGOPTIONS="-c search_path=$schema" psql -q -v ON_ERROR_STOP=1 "${single[@]}" "$url" -f "$f" >/dev/null
  done
done

if [ "$mode" = db ]; then
  echo "sqlx: database $db is migrated"
  exit 0
fi

for c in "${crates[@]}"; do
  dir=${c%%=*} schema=${c#*=}
  if [ -n "$schema" ]; then
    echo "DATABASE_URL=$url?options[search_path]=$schema" >"$dir/.env"
  else
    echo "DATABASE_URL=$url" >"$dir/.env"
  fi
done

# Touch every workspace source so the macros of every crate run again.
find crates services tests-e2e -name '*.rs' -exec touch {} +
mkdir -p "$tmp/sqlx"
env -u DATABASE_URL SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$tmp/sqlx" \
  cargo clippy --workspace --all-targets -- -D warnings

mkdir -p .sqlx
if [ "$mode" = prepare ]; then
  rm -f .sqlx/query-*.json
  cp "$tmp"/sqlx/query-*.json .sqlx/ 2>/dev/null || true
  echo "sqlx: .sqlx/ holds $(ls .sqlx | wc -l) queries"
  exit 0
fi
if ! diff -r -q "$tmp/sqlx" .sqlx; then
  echo "sqlx: .sqlx/ is not current: run 'make sqlx-prepare' and commit .sqlx/" >&2
  exit 1
fi
echo "sqlx: .sqlx/ is current ($(ls .sqlx | wc -l) queries)"
