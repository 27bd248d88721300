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
