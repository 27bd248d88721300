#!/usr/bin/env bash
# The session lookup behind every cache miss of GET /v1/auth/me
# (identity::sessions::live_by_hash), measured with pgbench against the same
# lookup without the organization status (the query before suspension existed)
# and with the status joined from org_states per membership (the first
# version), alternating in one run on one seeded database: 10,000 users with a
# session and 5 memberships each, 500 organizations suspended (a quarter of
# the memberships).
# Usage: scripts/bench-resolve.sh [seconds per phase, default 15] [rounds, default 2]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-15}
ROUNDS=${2:-2}
DB=hub_bench_resolve
PGH=${PGHOST:-127.0.0.1}
PGP=${PGPORT:-5432}
scripts/sqlx.sh db "$DB" >/dev/null
psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -v ON_ERROR_STOP=1 -q <<'SQL'
SET search_path = identity;
INSERT INTO users (id, email) SELECT md5(i::text)::uuid, 'u'||i||'@example.com' FROM generate_series(1,10000) i;
INSERT INTO sessions (id, user_id, token_hash, expires_at)
  SELECT md5('s'||i)::uuid, md5(i::text)::uuid, sha256(i::text::bytea), now() + interval '1 day'
  FROM generate_series(1,10000) i;
INSERT INTO org_states (org_id, status, version)
  SELECT md5('o'||j)::uuid, 'suspended', 1 FROM generate_series(0,1999,4) j;
INSERT INTO memberships (org_id, user_id, role, org_suspended)
  SELECT md5('o'||((i*7+k) % 2000))::uuid, md5(i::text)::uuid, 'developer', ((i*7+k) % 2000) % 4 = 0
  FROM generate_series(1,10000) i, generate_series(1,5) k;
ANALYZE;
SQL
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null' EXIT
head='\set i random(1, 10000)'
tail="FROM identity.sessions s JOIN identity.users u ON u.id = s.user_id
WHERE s.token_hash = sha256(:i::text::bytea) AND s.revoked_at IS NULL AND s.expires_at > now();"
cat >"$dir/reference.sql" <<SQL
$head
SELECT s.id, s.expires_at, u.id, u.email, u.name,
  COALESCE((SELECT json_agg(json_build_object('org_id', m.org_id, 'role', m.role) ORDER BY m.created_at, m.org_id)
            FROM identity.memberships m WHERE m.user_id = u.id), '[]'::json)
$tail
SQL
cat >"$dir/joined.sql" <<SQL
$head
SELECT s.id, s.expires_at, s.mfa, u.id, u.email, u.name,
  COALESCE((SELECT json_agg(json_build_object('org_id', m.org_id, 'role', m.role, 'status', COALESCE(o.status, 'active'))
                            ORDER BY m.created_at, m.org_id)
            FROM identity.memberships m LEFT JOIN identity.org_states o ON o.org_id = m.org_id
            WHERE m.user_id = u.id), '[]'::json)
$tail
SQL
# What identity runs (sessions.rs, live_by_hash).
cat >"$dir/current.sql" <<SQL
$head
SELECT s.id, s.expires_at, s.mfa, u.id, u.email, u.name,
  COALESCE((SELECT json_agg(CASE WHEN m.org_suspended
                                 THEN json_build_object('org_id', m.org_id, 'role', m.role, 'status', 'suspended')
                                 ELSE json_build_object('org_id', m.org_id, 'role', m.role) END
                            ORDER BY m.created_at, m.org_id)
            FROM identity.memberships m WHERE m.user_id = u.id), '[]'::json)
$tail
SQL
for r in $(seq 1 "$ROUNDS"); do
  for q in reference current joined; do
    tps=$(pgbench -h "$PGH" -p "$PGP" -U postgres -n -M prepared -c 8 -j 2 -T "$SECS" -f "$dir/$q.sql" "$DB" 2>/dev/null \
      | awk '/^tps/ {printf "%.0f", $3}')
    echo "round $r  $q: $tps tps"
  done
done
