#!/usr/bin/env bash
# Drop the databases earlier test runs left behind (hubtest_*).
set -euo pipefail
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
dbs=$(psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -Atqc \
  "select datname from pg_database where datname like 'hubtest\_%'")
for db in $dbs; do
  psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null
done
[ -z "$dbs" ] || echo "dropped $(echo "$dbs" | wc -l) test databases"
