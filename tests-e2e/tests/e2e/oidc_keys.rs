//! The OpenID Provider's signing keys (issue 37): published without
//! credentials at `/.well-known/jwks.json`, the private half sealed at rest,
//! rotated on identity's clock with the next key published ahead of its use
//! and the old one kept until every token it signed has expired.

use crate::oauth_token::{token, verified};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, StackOptions, TestStack};

/// The kids published now (waiting until there are `n`).
async fn kids(s: &TestStack, n: usize) -> Vec<String> {
    eventually(Duration::from_secs(20), || async move {
        let r = s.get("/.well-known/jwks.json", None).await;
        let keys = r.body["keys"].as_array()?.clone();
        (r.status == 200 && keys.len() == n).then(|| {
            keys.iter()
                .map(|k| k["kid"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
    })
    .await
    .unwrap_or_else(|| panic!("never {n} published keys"))
}

#[tokio::test]
async fn signing_keys_are_published_sealed_and_rotated_with_overlap() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[oidc]\nkey_rotation_days = 1\nkey_prepublish_secs = 3600\n\
                        token_max_life_secs = 600\nkey_check_secs = 1\n"
            .to_owned(),
        ..Default::default()
    })
    .await;

    // One key at first, published without credentials.
    let first = kids(&s, 1).await;
    let r = s.get("/.well-known/jwks.json", None).await;
    assert_eq!(
        r.headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/jwk-set+json")
    );
    assert_eq!(
        r.headers.get("cache-control").and_then(|v| v.to_str().ok()),
        Some("public, max-age=300")
    );
    let k: &Value = &r.body["keys"][0];
    assert_eq!(
        (&k["kty"], &k["crv"], &k["alg"], &k["use"]),
        (
            &Value::from("EC"),
            &Value::from("P-256"),
            &Value::from("ES256"),
            &Value::from("sig")
        )
    );
    assert!(k.get("d").is_none(), "never the private part");
    let x = URL_SAFE_NO_PAD
        .decode(k["x"].as_str().expect("x"))
        .expect("base64url");
    assert_eq!(x.len(), 32);
    // At rest the private key is sealed: the PKCS#8 document would carry the
    // public point, which does not appear in the stored bytes.
    let sealed: Vec<u8> = sqlx::query_scalar!(
        "SELECT private_sealed FROM identity.oidc_keys WHERE kid = $1",
        first[0],
    )
    .fetch_one(&s.db)
    .await
    .expect("the row");
    assert!(
        !sealed.windows(32).any(|w| w == x.as_slice()),
        "stored in clear"
    );

    // An hour before its window ends, the next key is published beside it.
    s.clock.advance(time::Duration::seconds(86_400 - 3_600 + 1));
    let both = kids(&s, 2).await;
    assert_eq!(both[0], first[0], "the signing key first, still published");
    assert_ne!(both[1], first[0]);
    // Once every token the first one signed has expired, it is gone.
    s.clock.advance(time::Duration::seconds(3_600 + 600 + 1));
    assert_eq!(kids(&s, 1).await, [both[1].clone()]);
}

#[tokio::test]
async fn tokens_signed_before_and_after_a_rotation_both_verify_until_they_expire() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[oidc]\nkey_rotation_days = 1\nkey_prepublish_secs = 3600\n\
                        token_max_life_secs = 600\nkey_check_secs = 1\n"
            .to_owned(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Back end", "kind": "confidential",
                   "redirect_uris": ["https://b.example.com/cb"], "scopes": ["openid", "email"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let (id, secret) = (c.text("id").to_owned(), c.text("client_secret").to_owned());
    let first = kids(&s, 1).await;
    // A token of the first key, a minute before its window ends (the next
    // key published beside it by then).
    s.clock.advance(time::Duration::seconds(86_400 - 60));
    let both = kids(&s, 2).await;
    let jwt_of = |kid: String| {
        let (s, id, secret) = (&s, id.clone(), secret.clone());
        async move {
            eventually(Duration::from_secs(20), || async {
                let r = token(s, Some((&id, &secret)), "grant_type=client_credentials").await;
                assert_eq!(r.status, 200, "{:?}", r.body);
                let jwt = r.text("access_token").to_owned();
                let header: Value = serde_json::from_slice(
                    &URL_SAFE_NO_PAD
                        .decode(jwt.split('.').next().unwrap_or(""))
                        .unwrap_or_default(),
                )
                .unwrap_or(Value::Null);
                (header["kid"] == kid.as_str()).then_some(jwt)
            })
            .await
            .unwrap_or_else(|| panic!("no token signed with {kid}"))
        }
    };
    let before = jwt_of(first[0].clone()).await;
    // The window ends: the next key signs; the first stays published.
    s.clock.advance(time::Duration::seconds(61));
    let after = jwt_of(both[1].clone()).await;
    let jwks = s.get("/.well-known/jwks.json", None).await.body;
    let introspect = |jwt: String| {
        let (s, id, secret) = (&s, id.clone(), secret.clone());
        async move {
            let form = format!("token={jwt}");
            token_at(s, "/oauth/introspect", (&id, &secret), &form).await
        }
    };
    for (which, jwt) in [("before", &before), ("after", &after)] {
        verified(jwt, &jwks);
        let r = introspect(jwt.clone()).await;
        assert_eq!(r.body["active"], true, "{which}: {:?}", r.body);
    }
    // Once they have expired, the first key is no longer published and
    // neither token is active.
    s.clock.advance(time::Duration::seconds(600 + 1));
    assert_eq!(kids(&s, 1).await, [both[1].clone()]);
    for (which, jwt) in [("before", before), ("after", after)] {
        let r = introspect(jwt).await;
        assert_eq!(r.body["active"], false, "{which}: {:?}", r.body);
    }
}

/// POST a form to `path` with HTTP Basic client authentication.
async fn token_at(s: &TestStack, path: &str, basic: (&str, &str), form: &str) -> tests_e2e::Resp {
    use base64::engine::general_purpose::STANDARD;
    let resp = s
        .http
        .post(format!("{}{path}", s.core()))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(
            "authorization",
            format!(
                "Basic {}",
                STANDARD.encode(format!("{}:{}", basic.0, basic.1))
            ),
        )
        .body(form.to_owned())
        .send()
        .await
        .expect("the provider answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.json().await.unwrap_or(Value::Null);
    tests_e2e::Resp {
        status,
        body,
        headers,
    }
}
