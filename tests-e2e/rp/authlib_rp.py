"""A relying party built on Authlib (no code of ours in the protocol): the
authorization code flow with PKCE, the ID token validated against the JWKS,
refresh, userinfo, introspection, revocation and RP-initiated logout, against
a running stack. Run by scripts/rp-check.sh for the end-to-end test
tests-e2e/tests/e2e/oidc_rp.rs, which reads the JSON line it prints.

Environment: HUB_BASE (the core host the test reaches), HUB_ISSUER (the
provider's issuer, which its endpoints are under), HUB_SESSION (a person's
session token: this script plays the console too, accepting the request on
the person's behalf as the console does), HUB_CLIENT_ID, HUB_CLIENT_SECRET,
HUB_REDIRECT_URI, HUB_LOGOUT_URI.
"""

import json
import os
import sys
from urllib.parse import parse_qs, urlparse

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken

base = os.environ["HUB_BASE"].rstrip("/")
issuer = os.environ["HUB_ISSUER"]
session = os.environ["HUB_SESSION"]
client_id = os.environ["HUB_CLIENT_ID"]
secret = os.environ["HUB_CLIENT_SECRET"]
redirect_uri = os.environ["HUB_REDIRECT_URI"]
logout_uri = os.environ["HUB_LOGOUT_URI"]


def here(url):
    """An endpoint of the metadata at the address the test reaches."""
    assert url.startswith(issuer), url
    return base + url[len(issuer):]


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


meta = requests.get(f"{base}/.well-known/openid-configuration", timeout=10).json()
check(meta["issuer"] == issuer, "discovery names the issuer")
check("S256" in meta["code_challenge_methods_supported"], "PKCE S256 offered")

client = OAuth2Session(
    client_id,
    secret,
    scope="openid email profile orgs offline_access",
    redirect_uri=redirect_uri,
    code_challenge_method="S256",
    token_endpoint_auth_method="client_secret_basic",
)
verifier = generate_token(64)
nonce = generate_token(20)
uri, state = client.create_authorization_url(
    here(meta["authorization_endpoint"]), code_verifier=verifier, nonce=nonce
)

# The browser: to the provider, which sends it to the console's sign-in...
r = requests.get(uri, allow_redirects=False, timeout=10)
check(r.status_code == 302, f"authorize redirects ({r.status_code} {r.text})")
handle = parse_qs(urlparse(r.headers["location"]).query)["request"][0]
# ...where the signed-in person accepts (the console's API call).
acc = requests.post(
    f"{base}/v1/oauth/authorization/accept",
    json={"request": handle},
    headers={"authorization": f"Bearer {session}"},
    timeout=10,
)
check(acc.status_code == 200, f"accept ({acc.status_code} {acc.text})")
back = acc.json()["redirect_to"]
check(parse_qs(urlparse(back).query)["iss"] == [issuer], "iss in the response (RFC 9207)")

# The product's back end: the code for tokens (Authlib checks state).
token = client.fetch_token(
    here(meta["token_endpoint"]),
    authorization_response=back,
    code_verifier=verifier,
    state=state,
)
jwks = JsonWebKey.import_key_set(requests.get(here(meta["jwks_uri"]), timeout=10).json())
claims = jwt.decode(
    token["id_token"],
    jwks,
    claims_cls=CodeIDToken,
    claims_options={"iss": {"values": [issuer]}},
    claims_params={"nonce": nonce, "client_id": client_id, "access_token": token["access_token"]},
)
claims.validate()  # iss, aud, exp, iat, nonce, at_hash, auth_time

# Refresh: a new refresh token each time; the old one is spent.
refreshed = client.refresh_token(here(meta["token_endpoint"]), refresh_token=token["refresh_token"])
check(refreshed["refresh_token"] != token["refresh_token"], "refresh rotates")
userinfo = client.get(here(meta["userinfo_endpoint"]), timeout=10).json()
check(userinfo["sub"] == claims["sub"], "userinfo names the ID token's subject")

introspected = client.introspect_token(
    here(meta["introspection_endpoint"]), token=refreshed["access_token"]
).json()
check(introspected["active"] is True, "the access token is active")
client.revoke_token(
    here(meta["revocation_endpoint"]),
    token=refreshed["refresh_token"],
    token_type_hint="refresh_token",
)
after = client.introspect_token(
    here(meta["introspection_endpoint"]), token=refreshed["refresh_token"]
).json()
check(after["active"] is False, "a revoked refresh token is inactive")

# RP-initiated logout: the hub session ends, the browser comes back.
out = requests.get(
    here(meta["end_session_endpoint"]),
    params={"id_token_hint": token["id_token"], "post_logout_redirect_uri": logout_uri, "state": "bye"},
    allow_redirects=False,
    timeout=10,
)
check(out.status_code == 302 and out.headers["location"] == f"{logout_uri}?state=bye", "logout redirects")
me = requests.get(f"{base}/v1/auth/me", headers={"authorization": f"Bearer {session}"}, timeout=10)

print(
    json.dumps(
        {
            "sub": claims["sub"],
            "email": claims.get("email"),
            "amr": claims.get("amr"),
            "userinfo": userinfo,
            "introspected_client": introspected.get("client_id"),
            "session_after_logout": me.status_code,
        }
    )
)
