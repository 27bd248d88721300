#!/usr/bin/env bash
# Benchmark of the staff overview (GET /v1/admin/overview through the gateway)
# with 10,000 organizations (100 suspended) and 100,000 audit entries, a few
# hundred items waiting in the queues, beside the bare actix route in the same
# run. Two figures:
#   cached    : the production default (overview.cache_secs = 5), wrk -c64
#   gathering : overview.cache_secs = 0, every request asks all six services
#               (one gathering at a time: -c1 is what one request costs)
# Target: p99 < 50 ms (issue 35). The whole stack runs in one process
# (devstack, release build), with production logging unless LOG=off.
# Usage: scripts/bench-overview.sh [duration, default 10s]. Needs wrk (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PGH=${PGHOST:-127.0.0.1} PGP=${PGPORT:-5432}
DB=hub_bench_overview
ADMIN="postgres://postgres@$PGH:$PGP/$DB"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release -q -p hub-stack --bin devstack
cargo build --release -q -p tests-e2e --bin baseline
psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $DB"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 3000); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.01; done; echo "no answer from $1"; exit 1; }

export HUB_PROFILE=dev HUB_DATABASE_URL="$ADMIN"
SERVICES=(IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY)
. scripts/lib/bench-logging.sh
bench_logging "${SERVICES[@]}"
for v in "${SERVICES[@]}"; do
  export "${v}__NATS__SUBJECT_PREFIX=benchov." "${v}__NATS__STREAM_SUFFIX=_benchov"
done

start_stack() { # cache_secs
  CORE_API_GATEWAY__OVERVIEW__CACHE_SECS=$1 "$BIN/devstack" >>/tmp/bench-overview-stack.log 2>&1 &
  STACK=$!; pids+=("$STACK")
  wait_http http://127.0.0.1:8080/healthz
  wait_http http://127.0.0.1:8080/readyz
}
: >/tmp/bench-overview-stack.log
start_stack 5

# The data: 10,000 organizations (1% suspended), 100,000 audit entries, and
# items waiting in each queue.
psql -q -v ON_ERROR_STOP=1 "$ADMIN" <<'SQL'
INSERT INTO org_billing.organizations (id, name, legal_type, country, distributor_id, status, status_reason, status_changed_at, created_by)
SELECT gen_random_uuid(), 'Bench Org ' || i, 'corporate', 'TR',
       (SELECT id FROM org_billing.distributors ORDER BY id LIMIT 1),
       CASE WHEN i % 100 = 0 THEN 'suspended' ELSE 'active' END,
       CASE WHEN i % 100 = 0 THEN 'benchmark' END,
       CASE WHEN i % 100 = 0 THEN now() - i * interval '1 minute' END,
       gen_random_uuid()
FROM generate_series(1, 10000) i;
INSERT INTO identity.audit_log (actor_user_id, action, subject, detail, ip, created_at)
SELECT gen_random_uuid(), 'project.created', 'org:' || gen_random_uuid(), '{}', '',
       now() - i * interval '1 second'
FROM generate_series(1, 100000) i;
INSERT INTO kyc.submissions (id, org_id, org_name, legal_type, status, payload, submitted_by, created_at)
SELECT gen_random_uuid(), o.id, o.name, 'corporate', CASE WHEN n % 2 = 0 THEN 'pending' ELSE 'approved' END,
       '\x00', gen_random_uuid(), now() - n * interval '1 hour'
FROM (SELECT id, name, row_number() OVER () n FROM org_billing.organizations LIMIT 400) o;
INSERT INTO org_billing.payment_claims (id, org_id, amount_minor, currency, reference, created_by, created_at)
SELECT gen_random_uuid(), id, 1000, 'TRY', 'bench', gen_random_uuid(), now() - interval '2 hours'
FROM org_billing.organizations LIMIT 200;
INSERT INTO agent.proposals (id, user_id, title, problem, proposal, status, created_at, updated_at)
SELECT gen_random_uuid(), gen_random_uuid(), 'p' || i, 'x', 'y', 'draft', now(), now()
FROM generate_series(1, 300) i;
ANALYZE;
SQL

"$BIN/baseline" 8099 "$ADMIN" >/tmp/bench-overview-baseline.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8099/bare

DEV=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
  -d '{"email":"staff@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
TOKEN=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
  -d "{\"token\":\"$DEV\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')
AUTH="authorization: Bearer $TOKEN"
check() {
  local body
  body=$(curl -fs localhost:8080/v1/admin/overview -H "$AUTH")
  python3 - "$body" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
down = [s for s, v in o["services"].items() if not v["ready"] or "error" in v]
assert not down, f"services not answering: {down}: {o}"
q = o["queues"]
assert q["organizations_suspended"]["count"] == 100, q
assert q["kyc_submissions_pending"]["count"] == 200, q
print("  answer:", ", ".join(f"{k} {v['count']}" for k, v in sorted(q.items())))
PY
}

run() { # label connections url [header]
  local out rps p99 errs
  out=$(wrk -t"$(( $2 < 2 ? 1 : 2 ))" -c"$2" -d"$DUR" --latency -H "${4:-x-bench: 1}" "$3")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf '%-46s %10s req/s   p99 %-9s non-2xx %s\n' "$1" "$rps" "$p99" "${errs:-0}"
}
echo "wrk -d$DUR (-t2, -t1 for c1), $(nproc) cores, $(date -u +%FT%TZ); $LOG_LABEL"
echo "data: 10,000 organizations, 100,000 audit entries"
check
run "bare actix JSON route (reference), c64" 64 http://127.0.0.1:8099/bare
run "GET /v1/admin/overview, cached (5 s), c64" 64 http://127.0.0.1:8080/v1/admin/overview "$AUTH"

kill "$STACK"; wait "$STACK" 2>/dev/null || true
start_stack 0
check
run "GET /v1/admin/overview, gathering each, c1" 1 http://127.0.0.1:8080/v1/admin/overview "$AUTH"
run "GET /v1/admin/overview, gathering each, c8" 8 http://127.0.0.1:8080/v1/admin/overview "$AUTH"
echo "target: p99 < 50 ms"
