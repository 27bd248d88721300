//! The OpenID Provider driven by a relying-party library no one here wrote:
//! Authlib (scripts/rp-check.sh, tests-e2e/rp/authlib_rp.py) runs the code
//! flow with PKCE against this stack through the gateway, validates the ID
//! token against the JWKS (signature, iss, aud, nonce, at_hash), refreshes,
//! reads userinfo, introspects, revokes and logs out; the test checks what
//! it reports against the stack.

use serde_json::{json, Value};
use tests_e2e::TestStack;

#[tokio::test]
async fn authlib_signs_a_person_in_and_out_with_the_code_flow() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (rita, org) = s.org_with_owner("rita@example.com").await;
    let rita_id = s
        .get("/v1/auth/me", Some(&rita))
        .await
        .text("user_id")
        .to_owned();
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Wiki", "kind": "confidential", "first_party": true,
                   "redirect_uris": ["https://wiki.example.com/oidc/callback"],
                   "post_logout_redirect_uris": ["https://wiki.example.com/"],
                   "scopes": ["openid", "email", "profile", "orgs", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    s.published_keys().await;

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/rp-check.sh");
    let mut command = std::process::Command::new(script);
    command
        .env("HUB_BASE", s.core())
        .env("HUB_ISSUER", "http://localhost:8080")
        .env("HUB_SESSION", &rita)
        .env("HUB_CLIENT_ID", c.text("id"))
        .env("HUB_CLIENT_SECRET", c.text("client_secret"))
        .env("HUB_REDIRECT_URI", "https://wiki.example.com/oidc/callback")
        .env("HUB_LOGOUT_URI", "https://wiki.example.com/");
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("rp-check.sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the relying party failed:\n{stderr}");
    let report: Value = serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .rfind(|l| !l.is_empty())
            .expect("a report line"),
    )
    .unwrap_or_else(|e| panic!("a JSON report ({e}): {stderr}"));
    assert_eq!(report["sub"], rita_id.as_str());
    assert_eq!(report["email"], "rita@example.com");
    assert_eq!(report["amr"], json!(["email"]));
    assert_eq!(report["userinfo"]["email"], "rita@example.com");
    assert_eq!(
        report["userinfo"]["orgs"],
        json!([{"org_id": org, "role": "owner"}])
    );
    assert_eq!(report["introspected_client"], c.text("id"));
    assert_eq!(report["session_after_logout"], 401);
    // The logout ended the session the library signed in with, here too.
    assert_eq!(s.get("/v1/auth/me", Some(&rita)).await.status, 401);
}

/// The provider's issuer in this stack's settings; requests to it go to the
/// stack's gateway instead (the one thing the test's HTTP client changes).
const ISSUER: &str = "http://localhost:8080";

#[tokio::test]
async fn the_openidconnect_crate_signs_a_person_in_and_verifies_the_id_token() {
    use openidconnect::core::{
        CoreClient, CoreJwsSigningAlgorithm, CoreProviderMetadata, CoreResponseType,
        CoreUserInfoClaims,
    };
    use openidconnect::{
        AuthenticationFlow, AuthorizationCode, ClientId, ClientSecret, CsrfToken, IntrospectionUrl,
        IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge, RedirectUrl, Scope,
        TokenIntrospectionResponse, TokenResponse,
    };

    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let sam = s.sign_in("sam@example.com").await;
    let sam_id = s
        .get("/v1/auth/me", Some(&sam))
        .await
        .text("user_id")
        .to_owned();
    let cb = "https://tool.example.com/callback";
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Tool", "kind": "confidential", "first_party": true,
                   "redirect_uris": [cb],
                   "scopes": ["openid", "email", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    s.published_keys().await;

    let http = service_kit::tls::http_client(&Default::default())
        .expect("client")
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let base = s.core().to_owned();
    let send = |req: openidconnect::HttpRequest| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let url = req.uri().to_string().replacen(ISSUER, &base, 1);
            let mut rb = http.request(req.method().clone(), url);
            for (k, v) in req.headers() {
                rb = rb.header(k, v);
            }
            let resp = rb.body(req.into_body()).send().await?;
            let mut out = http::Response::builder().status(resp.status());
            for (k, v) in resp.headers() {
                out = out.header(k, v);
            }
            let body = resp.bytes().await?.to_vec();
            Ok::<_, reqwest::Error>(out.body(body).expect("a response"))
        }
    };

    let meta =
        CoreProviderMetadata::discover_async(IssuerUrl::new(ISSUER.into()).expect("issuer"), &send)
            .await
            .expect("discovery, with the JWKS");
    let client = CoreClient::from_provider_metadata(
        meta,
        ClientId::new(c.text("id").to_owned()),
        Some(ClientSecret::new(c.text("client_secret").to_owned())),
    )
    .set_redirect_uri(RedirectUrl::new(cb.into()).expect("redirect"))
    .set_introspection_url(
        IntrospectionUrl::new(format!("{ISSUER}/oauth/introspect")).expect("url"),
    );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, csrf, nonce) = client
        .authorize_url(
            AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("email".into()))
        .add_scope(Scope::new("offline_access".into()))
        .set_pkce_challenge(challenge)
        .url();

    // The browser and the console (as in the code-flow tests).
    let r = http
        .get(url.as_str().replacen(ISSUER, &base, 1))
        .send()
        .await
        .expect("authorize");
    assert_eq!(r.status(), 302);
    let location = r.headers()["location"].to_str().expect("ascii").to_owned();
    let handle = reqwest::Url::parse(&location)
        .expect("url")
        .query_pairs()
        .find(|(k, _)| k == "request")
        .map(|(_, v)| v.into_owned())
        .expect("a handle");
    let acc = s
        .post(
            "/v1/oauth/authorization/accept",
            Some(&sam),
            json!({"request": handle}),
        )
        .await;
    assert_eq!(acc.status, 200, "{:?}", acc.body);
    let back: std::collections::HashMap<String, String> =
        reqwest::Url::parse(acc.text("redirect_to"))
            .expect("url")
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    assert_eq!(&back["state"], csrf.secret());

    let tokens = client
        .exchange_code(AuthorizationCode::new(back["code"].clone()))
        .expect("a token endpoint")
        .set_pkce_verifier(verifier)
        .request_async(&send)
        .await
        .expect("the code exchanged");
    // ES256: the crate verifies RS256 unless told (accounts.md says so).
    let id_verifier = client
        .id_token_verifier()
        .set_allowed_algs(vec![CoreJwsSigningAlgorithm::EcdsaP256Sha256]);
    let id_token = tokens.id_token().expect("an ID token");
    let claims = id_token
        .claims(&id_verifier, &nonce)
        .expect("the ID token verifies (signature, iss, aud, exp, nonce)");
    assert_eq!(claims.subject().as_str(), sam_id);
    assert_eq!(claims.email().map(|e| e.as_str()), Some("sam@example.com"));
    let at_hash = claims.access_token_hash().expect("at_hash");
    let expected = openidconnect::AccessTokenHash::from_token(
        tokens.access_token(),
        id_token.signing_alg().expect("alg"),
        id_token.signing_key(&id_verifier).expect("key"),
    )
    .expect("hash");
    assert_eq!(at_hash, &expected);

    let info: CoreUserInfoClaims = client
        .user_info(tokens.access_token().clone(), None)
        .expect("a userinfo endpoint")
        .request_async(&send)
        .await
        .expect("userinfo");
    assert_eq!(info.subject().as_str(), sam_id);

    let refresh = tokens.refresh_token().expect("a refresh token").clone();
    let renewed = client
        .exchange_refresh_token(&refresh)
        .expect("a token endpoint")
        .request_async(&send)
        .await
        .expect("refreshed");
    let newer = renewed.refresh_token().expect("rotated").clone();
    assert_ne!(newer.secret(), refresh.secret());
    let active = client
        .introspect(renewed.access_token())
        .request_async(&send)
        .await
        .expect("introspected");
    assert!(active.active());
    // The crate refuses a revocation endpoint over plain http (this stack's):
    // the revocation itself, RFC 7009's form, by hand.
    let r = http
        .post(format!("{base}/oauth/revoke"))
        .basic_auth(c.text("id"), Some(c.text("client_secret")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "token={}&token_type_hint=refresh_token",
            newer.secret()
        ))
        .send()
        .await
        .expect("revoke");
    assert_eq!(r.status(), 200);
    // Revoking the refresh token ended the grant: the access token too.
    let after = client
        .introspect(renewed.access_token())
        .request_async(&send)
        .await
        .expect("introspected");
    assert!(!after.active());
}
