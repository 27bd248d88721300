#!/usr/bin/env bash
# A relying party no one here wrote, against a running stack: Authlib (pinned)
# runs tests-e2e/rp/authlib_rp.py (the code flow with PKCE, the ID token
# against the JWKS, refresh, userinfo, introspection, revocation, logout) and
# prints one JSON line. The end-to-end test oidc_rp runs it with the stack's
# addresses and a client and person of its own in the environment (see the
# script's docstring).
#
#   scripts/rp-check.sh --install   install the pinned Authlib only
#
# Installed once into ~/.cache/hub-rp-venv (HUB_RP_VENV).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HUB_RP_VENV:-$HOME/.cache/hub-rp-venv}
AUTHLIB=1.9.10
REQUESTS=2.34.2
if ! "$VENV/bin/python" -c "import authlib, sys; sys.exit(authlib.__version__ != '$AUTHLIB')" 2>/dev/null; then
  echo "rp-check: installing Authlib $AUTHLIB into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "Authlib==$AUTHLIB" "requests==$REQUESTS"
fi
if [ "${1:-}" = "--install" ]; then
  exit 0
fi
exec "$VENV/bin/python" tests-e2e/rp/authlib_rp.py
