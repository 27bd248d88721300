#!/usr/bin/env bash
# Schemathesis against a running stack, every check, the spec in
# proto-docs/openapi.yaml and the run's settings in tests-e2e/schemathesis.toml
# (which operations get which supplied ids, the exclusions and why).
#
#   scripts/schemathesis.sh --install   install the pinned schemathesis only
#   scripts/schemathesis.sh [st run options...]
#
# The second form is what the end-to-end test `contract::schemathesis`
# (tests-e2e/tests/e2e/schemathesis.rs) runs against a stack of its own, with
# the hosts, the signed-in bearer and the ids in the environment:
#   HUB_BASE_URL, HUB_BRAND_BASE_URL   the core host and the product host
#   HUB_TOKEN                           a session bearer (staff, owner of HUB_ORG_ID)
#   HUB_ORG_ID, HUB_USER_ID, HUB_MEMBER_ID, HUB_KEY_ID, HUB_INVITE_ID, HUB_SESSION_ID,
#   HUB_SUBMISSION_ID, HUB_SERVER_ID, HUB_MANUAL_SERVER_ID, HUB_WEBHOOK_ID,
#   HUB_CONVERSATION_ID, HUB_SKU_ID,   ids made beforehand (see the toml)
#   HUB_CHARGE_ID, HUB_PROFORMA_ID, HUB_INVOICE_ID, HUB_VOID_INVOICE_ID,
#   HUB_CLAIM_ID, HUB_REJECT_CLAIM_ID, HUB_RUN_ID, HUB_DISTRIBUTOR_ID,
#   HUB_PROJECT_ID, HUB_ASSET_ID, HUB_SUSPEND_ORG_ID,
#   HUB_KB_ARTICLE_ID, HUB_PROPOSAL_ID
#
# Tools, pinned, installed once into ~/.cache/hub-schemathesis-venv
# (HUB_SCHEMATHESIS_VENV).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HUB_SCHEMATHESIS_VENV:-$HOME/.cache/hub-schemathesis-venv}
SCHEMATHESIS=4.32.5

if [ ! -x "$VENV/bin/st" ] || [ "$("$VENV/bin/st" --version 2>/dev/null)" != "st, version $SCHEMATHESIS" ]; then
  echo "schemathesis: installing schemathesis $SCHEMATHESIS into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS"
fi
if [ "${1:-}" = "--install" ]; then
  exit 0
fi

# Reports (JUnit) land here for a look; the settings with the hosts and ids in.
REPORTS=${HUB_SCHEMATHESIS_REPORTS:-$(mktemp -d)}
"$VENV/bin/python" -c 'import os, sys; sys.stdout.write(os.path.expandvars(sys.stdin.read()))' \
  <tests-e2e/schemathesis.toml >"$REPORTS/schemathesis.toml"

# The spec is served over HTTP on a free loopback port: a schema read from a
# file needs one --url for every operation, while one fetched by URL keeps the
# servers each path documents (the core host, the product host's /core-api
# and the product host's root), so that those are tested too.
"$VENV/bin/python" - proto-docs >"$REPORTS/spec-port" <<'PY' &
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=sys.argv[1]))
print(server.server_address[1], flush=True)
server.serve_forever()
PY
SPEC_SERVER=$!
trap 'kill "$SPEC_SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$REPORTS/spec-port" ] && break; sleep 0.1; done
SPEC_URL="http://127.0.0.1:$(cat "$REPORTS/spec-port")/openapi.yaml"

"$VENV/bin/st" --config-file "$REPORTS/schemathesis.toml" run "$SPEC_URL" \
  --checks all \
  -H "Authorization: Bearer ${HUB_TOKEN:?HUB_TOKEN: a session bearer}" \
  --report junit --report-dir "$REPORTS" \
  --no-color \
  "$@"
