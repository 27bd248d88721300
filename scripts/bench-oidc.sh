#!/usr/bin/env bash
# The OpenID Provider's hot paths (issue 37), each beside its reference in the
# same run, with production logging (scripts/lib/bench-logging.sh; LOG=off for
# the labelled second figure):
#   GET /v1/profile via the gateway with a session token (cached) and with an
#   access token of the provider (a JWT, cached the same way) - target >= 0.95x;
#   the token endpoint's refresh grant (POST /oauth/token, one grant per client,
#   each refresh with the token the last answer gave) - target >= 2,000/s.
# Usage: scripts/bench-oidc.sh [duration, default 10s] [refresh clients, default 64]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10s}
CLIENTS=${2:-64}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/hub-target}
BIN="$CARGO_TARGET_DIR/release"
PG=${PGHOST:-127.0.0.1}:${PGPORT:-5432}
DB=hub_bench_oidc
CB=https://rp.example.com/cb
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release -q -p identity -p org-billing -p core-api-gateway --bins
cargo build --release -q -p tests-e2e --bin refresh-load
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h "${PG%:*}" -p "${PG#*:}" -U postgres -qc "CREATE DATABASE $DB"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 500); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done; echo "no answer from $1"; exit 1; }

. scripts/lib/bench-three.sh
bench_three_env "$PG" "$DB" bench_oidc
"$BIN/identity" >/tmp/bench-oidc-identity.log 2>&1 & pids+=($!)
"$BIN/org-billing" >/tmp/bench-oidc-billing.log 2>&1 & pids+=($!)
"$BIN/core-api-gateway" >/tmp/bench-oidc-gateway.log 2>&1 & pids+=($!)
wait_http http://127.0.0.1:8081/healthz
wait_http http://127.0.0.1:8080/healthz

session() { # email -> session token
  local dev
  dev=$(curl -fs localhost:8080/v1/auth/request-link -H 'content-type: application/json' \
    -d "{\"email\":\"$1\"}" | sed -E 's/.*"dev_token":"([^"]+)".*/\1/')
  curl -fs localhost:8080/v1/auth/verify -H 'content-type: application/json' \
    -d "{\"token\":\"$dev\"}" | sed -E 's/.*"session_token":"([^"]+)".*/\1/'
}
STAFF=$(session staff@example.com)
TOKEN=$(session bench@example.com)
CLIENT=$(curl -fs localhost:8080/v1/admin/oauth-clients -H "authorization: Bearer $STAFF" \
  -H 'content-type: application/json' \
  -d "{\"name\":\"bench\",\"kind\":\"public\",\"first_party\":true,\"redirect_uris\":[\"$CB\"],\"scopes\":[\"openid\",\"email\",\"orgs\",\"offline_access\"]}" \
  | sed -E 's/.*"id":"([^"]+)".*/\1/')
# The first signing key is made at start.
for _ in $(seq 1 200); do curl -fs localhost:8080/.well-known/jwks.json | grep -q '"kid"' && break; sleep 0.05; done
# One code flow with PKCE for the access token (the console's part by its API).
JWT=$(python3 - "$TOKEN" "$CLIENT" "$CB" <<'PY'
import base64, hashlib, json, sys, urllib.parse, urllib.request
token, client, cb = sys.argv[1:]
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k): return None
opener = urllib.request.build_opener(NoRedirect)
verifier = "b" * 64
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
q = urllib.parse.urlencode({"client_id": client, "redirect_uri": cb, "response_type": "code",
    "scope": "openid email orgs", "state": "s", "code_challenge": challenge, "code_challenge_method": "S256"})
try:
    opener.open(f"http://127.0.0.1:8080/oauth/authorize?{q}")
    raise SystemExit("authorize did not redirect")
except urllib.error.HTTPError as e:
    loc = e.headers["location"]
handle = urllib.parse.parse_qs(urllib.parse.urlparse(loc).query)["request"][0]
req = urllib.request.Request("http://127.0.0.1:8080/v1/oauth/authorization/accept",
    data=json.dumps({"request": handle}).encode(),
    headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
to = json.load(urllib.request.urlopen(req))["redirect_to"]
code = urllib.parse.parse_qs(urllib.parse.urlparse(to).query)["code"][0]
body = urllib.parse.urlencode({"grant_type": "authorization_code", "client_id": client, "code": code,
    "redirect_uri": cb, "code_verifier": verifier}).encode()
t = json.load(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8080/oauth/token", data=body,
    headers={"content-type": "application/x-www-form-urlencoded"})))
print(t["access_token"])
PY
)
curl -fs localhost:8080/v1/profile -H "authorization: Bearer $TOKEN" >/dev/null
curl -fs localhost:8080/v1/profile -H "authorization: Bearer $JWT" >/dev/null

run() { # label url header var
  local out rps p99 errs
  out=$(wrk -t2 -c64 -d"$DUR" --latency -H "$3" "$2")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  errs=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf '%-44s %12s req/s   p99 %-9s non-2xx %s\n' "$1" "$rps" "$p99" "${errs:-0}"
  eval "$4=$rps"
}
echo "wrk -t2 -c64 -d$DUR, $(nproc) cores, $(date -u +%FT%TZ), $LOG_LABEL"
# Alternated twice, so that drift over the run hits both alike.
run "GET /v1/profile, session token" http://127.0.0.1:8080/v1/profile "authorization: Bearer $TOKEN" S1
run "GET /v1/profile, access token (JWT)" http://127.0.0.1:8080/v1/profile "authorization: Bearer $JWT" J1
run "GET /v1/profile, access token (JWT)" http://127.0.0.1:8080/v1/profile "authorization: Bearer $JWT" J2
run "GET /v1/profile, session token" http://127.0.0.1:8080/v1/profile "authorization: Bearer $TOKEN" S2
python3 -c "import sys; s=float(sys.argv[1])+float(sys.argv[2]); j=float(sys.argv[3])+float(sys.argv[4]); print(f'JWT bearer = {j/s:.2f}x the session token (target >= 0.95x)')" "$S1" "$S2" "$J1" "$J2"
SECS=${DUR%s}
echo "refresh grant, $CLIENTS clients, ${SECS}s (target >= 2000/s):"
"$CARGO_TARGET_DIR/release/refresh-load" http://127.0.0.1:8080 "$TOKEN" "$CLIENT" "$CB" "$CLIENTS" "$SECS"
