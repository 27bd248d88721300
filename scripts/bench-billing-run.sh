#!/usr/bin/env bash
# A billing run over ORGS organizations (10,000 by default) with 3 pending
# usage charges each, through the gateway, beside a plain INSERT ... SELECT of
# the same rows (the invoices and their lines, numbered by row_number()) in the
# same run, before and after it; then proof that the numbers have no gap and
# every charge is on exactly one invoice line.
# Usage: [ORGS=10000] scripts/bench-billing-run.sh. Target: >= 1,000 invoices/s.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${ORGS:-10000}
PERIOD=2026-10
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PGH=${PGHOST:-127.0.0.1}; PGP=${PGPORT:-5432}
DB=hub_bench_billing
cargo build --release -q -p identity -p org-billing -p core-api-gateway --bins
psql -h "$PGH" -p "$PGP" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null
psql -h "$PGH" -p "$PGP" -U postgres -qc "CREATE DATABASE $DB"
q() { psql -h "$PGH" -p "$PGP" -U postgres -d "$DB" -v ON_ERROR_STOP=1 -Atqc "$1"; }
# Wall-clock milliseconds of one SQL script.
timed() { local t0 t1; t0=$(date +%s%N); q "$1" >/dev/null; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 500); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done; echo "no answer from $1"; exit 1; }

. scripts/lib/bench-three.sh
bench_three_env "$PGH:$PGP" "$DB" benchb
export CORE_API_GATEWAY__PROXY__UPSTREAM_TIMEOUT_MS=600000 ORG_BILLING__SEED__BILLING_EXAMPLES=false
"$BIN/identity" >/tmp/benchb-identity.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8081/healthz
"$BIN/org-billing" >/tmp/benchb-billing.log 2>&1 & pids+=($!)
"$BIN/core-api-gateway" >/tmp/benchb-gateway.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8082/healthz
wait_http http://127.0.0.1:8080/healthz

dev=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
  -H "x-forwarded-for: 198.51.100.2" -d '{"email":"staff@example.com"}' | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
STAFF=$(curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
  -H "x-forwarded-for: 198.51.100.2" -d "{\"token\":\"$dev\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/')

# The organizations (Turkey's entity) and their pending usage charges, as
# server-product's usage events leave them.
q "SET search_path TO org_billing;
   CREATE TABLE bench_orgs AS SELECT gen_random_uuid() AS id FROM generate_series(1, $N);
   INSERT INTO organizations (id, name, legal_type, country, distributor_id, created_by)
     SELECT b.id, 'bench ' || b.id, 'corporate', 'TR', c.distributor_id, gen_random_uuid()
       FROM bench_orgs b, distributor_coverage c WHERE c.country = 'TR';
   INSERT INTO wallets (org_id, currency) SELECT id, 'TRY' FROM bench_orgs;
   INSERT INTO charges (id, org_id, description, brand, qty, unit_minor, amount_minor, currency,
                        source, source_ref, period, created_at)
     SELECT gen_random_uuid(), b.id, 'Server ' || k || ' (vps-small), October', 'Servers', 720, 10,
            7200, 'TRY', 'usage', 'bench:' || b.id || ':' || k, '$PERIOD', now() + k * interval '1 ms'
       FROM bench_orgs b, generate_series(1, 3) AS k;
   CREATE TABLE ref_invoices (LIKE invoices INCLUDING DEFAULTS);
   CREATE TABLE ref_lines (LIKE invoice_lines INCLUDING DEFAULTS);
   ANALYZE;"

# The reference: the same documents written by two plain INSERT ... SELECTs.
reference() {
  q "TRUNCATE org_billing.ref_invoices, org_billing.ref_lines; CHECKPOINT"
  timed "SET search_path TO org_billing; BEGIN;
    INSERT INTO ref_invoices (id, org_id, distributor_id, kind, number, currency, subtotal_minor,
                              total_minor, issued_at, due_at)
      SELECT gen_random_uuid(), c.org_id, o.distributor_id, 'invoice',
             'INV-2026-' || lpad((row_number() OVER (ORDER BY c.org_id))::text, 6, '0'),
             min(c.currency), sum(c.amount_minor), sum(c.amount_minor), now(), now() + interval '14 days'
        FROM charges c JOIN organizations o ON o.id = c.org_id
       WHERE c.period = '$PERIOD' AND c.status = 'pending' GROUP BY c.org_id, o.distributor_id;
    INSERT INTO ref_lines (invoice_id, position, charge_id, description, brand, qty, unit_minor, amount_minor)
      SELECT r.id, row_number() OVER (PARTITION BY c.org_id ORDER BY c.created_at, c.id), c.id,
             c.description, c.brand, c.qty, c.unit_minor, c.amount_minor
        FROM charges c JOIN ref_invoices r ON r.org_id = c.org_id
       WHERE c.period = '$PERIOD' AND c.status = 'pending';
    COMMIT;"
}
ref_before=$(reference)

q "CHECKPOINT"
t0=$(date +%s%N)
run=$(curl -fs localhost:8080/v1/admin/billing-runs -H "authorization: Bearer $STAFF" \
  -H 'content-type: application/json' -d "{\"period\":\"$PERIOD\"}")
t1=$(date +%s%N)
run_ms=$(((t1 - t0) / 1000000))
ref_after=$(reference)

S="SET search_path TO org_billing;"
invoices=$(q "$S SELECT count(*) FROM invoices")
echo "$N organizations x 3 charges, $(nproc) cores, $(date -u +%FT%TZ)"
echo "run: $(echo "$run" | sed -E 's/"started_at".*//')"
python3 - "$invoices" "$run_ms" "$ref_before" "$ref_after" <<'PY'
import sys
n, run, before, after = map(int, sys.argv[1:])
rate = n * 1000 / run
print(f"billing run via gateway: {n} invoices in {run} ms = {rate:,.0f} invoices/s (target >= 1,000)")
for name, ms in (("before", before), ("after", after)):
    print(f"plain INSERT ... SELECT of the same rows, {name}: {ms} ms = {n * 1000 / ms:,.0f} invoices/s")
lo, hi = min(before, after), max(before, after)
print(f"ratio run / INSERT ... SELECT: {lo / run:.2f}-{hi / run:.2f}")
PY
gaps=$(q "$S SELECT count(*) FILTER (WHERE n IS DISTINCT FROM rn) FROM
           (SELECT substr(number, 10)::bigint AS n, row_number() OVER (ORDER BY number) AS rn
              FROM invoices WHERE kind = 'invoice') x")
lines=$(q "$S SELECT count(*) FROM invoice_lines")
distinct=$(q "$S SELECT count(DISTINCT charge_id) FROM invoice_lines")
left=$(q "$S SELECT count(*) FROM charges WHERE status <> 'invoiced'")
echo "invoices $invoices, numbers out of sequence $gaps, lines $lines, distinct charges on lines $distinct, charges not invoiced $left"
if [ "$invoices" = "$N" ] && [ "$gaps" = 0 ] && [ "$lines" = $((3 * N)) ] && [ "$distinct" = "$lines" ] && [ "$left" = 0 ]; then
  echo "gapless: INV-2026-000001..$N, every charge on exactly one line"
else
  echo "MISMATCH"; exit 1
fi
