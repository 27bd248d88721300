#!/usr/bin/env bash
# Lighthouse (npm, pinned) on the console's sign-in page, an organization's
# page and the control tower's home, signed in, against the whole dev stack
# (devstack, release) with Debian's chromium. Prints each page's performance,
# accessibility and best-practices scores and its weight (bytes transferred:
# HTML, CSS and any script, compressed as served). Targets (issue 36):
# performance >= 95, accessibility 100, best practices >= 95, weight < 100 KB.
# Usage: scripts/lighthouse-console.sh   (reports in /tmp/lighthouse-console/)
set -euo pipefail
cd "$(dirname "$0")/.."
LIGHTHOUSE_VERSION=13.5.0
TOOLS=$HOME/.cache/hub-lighthouse
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
export CHROME_PATH=${CHROME_PATH:-/usr/bin/chromium}
PG=${PGHOST:-127.0.0.1}:${PGPORT:-5432}
DB=hub_lighthouse
OUT=/tmp/lighthouse-console
if [ ! -x "$TOOLS/node_modules/.bin/lighthouse" ]; then
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --no-audit --no-fund --silent "lighthouse@$LIGHTHOUSE_VERSION")
fi
cargo build --release -q -p hub-stack --bin devstack
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "CREATE DATABASE $DB"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 1500); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done; echo "no answer from $1"; exit 1; }
export HUB_PROFILE=dev HUB_DATABASE_URL="postgres://postgres@$PG/$DB"
for p in IDENTITY ORG_BILLING KYC SERVER_PRODUCT WEBHOOK_DISPATCHER AGENT CORE_API_GATEWAY CONSOLE; do
  export "${p}__NATS__STREAM_SUFFIX=_lighthouse" "${p}__NATS__SUBJECT_PREFIX=lighthouse."
done
"$CARGO_TARGET_DIR/release/devstack" >/tmp/lighthouse-stack.log 2>&1 & pid=$!
wait_http http://127.0.0.1:8080/healthz
wait_http http://127.0.0.1:8070/healthz

# Sign in through the console (the dev profile echoes the link's token): the
# sealed cookie the pages are loaded with.
console_cookie() { # email -> cookie
  local jar dev csrf
  jar=$(mktemp)
  dev=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
    -d "{\"email\":\"$1\"}" | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
  csrf=$(curl -fs -c "$jar" "localhost:8070/sign-in?token=$dev" | sed -nE 's/.*name="csrf" value="([^"]+)".*/\1/p' | head -n1)
  curl -fs -b "$jar" -c "$jar" -o /dev/null localhost:8070/sign-in/verify --data-urlencode "csrf=$csrf" --data-urlencode "token=$dev"
  awk '$6 == "hub-console" { print "hub-console=" $7 }' "$jar"
  rm -f "$jar"
}
CUSTOMER=$(console_cookie lighthouse@example.com)
STAFF=$(console_cookie staff@example.com)
csrf=$(curl -fs -H "cookie: $CUSTOMER" localhost:8070/orgs | sed -nE 's/.*name="csrf" value="([^"]+)".*/\1/p' | head -n1)
ORG=$(curl -fs -o /dev/null -w '%{redirect_url}' -H "cookie: $CUSTOMER" localhost:8070/orgs \
  --data-urlencode "csrf=$csrf" --data-urlencode "name=Lighthouse Ltd" \
  --data-urlencode legal_type=corporate --data-urlencode country=DE | sed -E 's#.*/orgs/##')

mkdir -p "$OUT"
audit() { # name url cookie
  local hdr='{}'
  [ -n "$3" ] && hdr="{\"Cookie\": \"$3\"}"
  "$TOOLS/node_modules/.bin/lighthouse" "$2" --quiet --output=json --output-path="$OUT/$1.json" \
    --only-categories=performance,accessibility,best-practices --extra-headers="$hdr" \
    --chrome-flags="--headless=new --no-sandbox --disable-gpu" >/dev/null
  python3 - "$1" "$OUT/$1.json" <<'PY'
import json, sys
name, path = sys.argv[1:]
r = json.load(open(path))
c = r["categories"]
weight = r["audits"]["total-byte-weight"]["numericValue"]
print(f"{name:12s} performance {c['performance']['score']*100:3.0f}  accessibility {c['accessibility']['score']*100:3.0f}"
      f"  best practices {c['best-practices']['score']*100:3.0f}  weight {weight/1024:.1f} KB")
PY
}
echo "lighthouse $LIGHTHOUSE_VERSION, $("$CHROME_PATH" --version 2>/dev/null), $(nproc) cores"
audit sign-in "http://127.0.0.1:8070/sign-in" ""
audit organization "http://127.0.0.1:8070/orgs/$ORG" "$CUSTOMER"
audit tower "http://127.0.0.1:8070/staff" "$STAFF"
