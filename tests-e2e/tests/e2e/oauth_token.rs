//! The token endpoint's client credentials grant (issue 37): a confidential
//! client's back end gets an access token (an RFC 9068 JWT) signed with a key
//! the JWKS publishes; every wrong client gets the same 401.

use base64::{
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
    Engine,
};
use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, Resp, TestStack};

pub(crate) async fn token(s: &TestStack, basic: Option<(&str, &str)>, form: &str) -> Resp {
    let mut rb = s
        .http
        .post(format!("{}/oauth/token", s.core()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned());
    if let Some((id, secret)) = basic {
        rb = rb.header(
            "authorization",
            format!("Basic {}", STANDARD.encode(format!("{id}:{secret}"))),
        );
    }
    let resp = rb.send().await.expect("POST /oauth/token");
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let bytes = resp.bytes().await.expect("the body");
    Resp {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        headers,
    }
}

/// The JWT's header and claims, once its signature verifies with the
/// published key of its kid.
pub(crate) fn verified(jwt: &str, jwks: &Value) -> (Value, Value) {
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    let decode = |p: &str| -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).expect("base64url")).expect("JSON")
    };
    let (header, claims) = (decode(parts[0]), decode(parts[1]));
    let key = jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["kid"] == header["kid"])
        .expect("the kid is published");
    let mut point = vec![4u8];
    for c in ["x", "y"] {
        point.extend(URL_SAFE_NO_PAD.decode(key[c].as_str().expect(c)).expect(c));
    }
    let sig = URL_SAFE_NO_PAD.decode(parts[2]).expect("signature");
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
        .expect("the signature verifies with the JWKS");
    (header, claims)
}

#[tokio::test]
async fn a_confidential_client_gets_a_signed_access_token_and_a_wrong_one_a_401() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let new = |kind: &str| {
        json!({"name": "Billing back end", "kind": kind, "redirect_uris": ["https://b.example.com/cb"],
               "scopes": ["openid", "email", "orgs"]})
    };
    let c = s
        .post("/v1/admin/oauth-clients", Some(&staff), new("confidential"))
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let (id, secret) = (c.text("id").to_owned(), c.text("client_secret").to_owned());
    let public = s
        .post("/v1/admin/oauth-clients", Some(&staff), new("public"))
        .await;
    let public_id = public.text("id").to_owned();
    // The first signing key is made at start.
    let jwks = eventually(Duration::from_secs(20), || async {
        let r = s.get("/.well-known/jwks.json", None).await;
        (r.body["keys"].as_array().is_some_and(|k| !k.is_empty())).then_some(r.body)
    })
    .await
    .expect("a published key");

    // HTTP Basic; the scopes default to what it may have without a user.
    let r = token(&s, Some((&id, &secret)), "grant_type=client_credentials").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["token_type"], "Bearer");
    assert_eq!(r.body["expires_in"], 300);
    assert_eq!(r.body["scope"], "email orgs");
    assert_eq!(
        r.headers.get("cache-control").and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    let (header, claims) = verified(r.text("access_token"), &jwks);
    assert_eq!(
        (header["alg"].clone(), header["typ"].clone()),
        (json!("ES256"), json!("at+jwt"))
    );
    assert_eq!(claims["sub"], id.as_str());
    assert_eq!(claims["client_id"], id.as_str());
    assert_eq!(claims["iss"], "http://localhost:8080");
    assert_eq!(claims["scope"], "email orgs");
    let (iat, exp) = (
        claims["iat"].as_i64().expect("iat"),
        claims["exp"].as_i64().expect("exp"),
    );
    assert_eq!(exp - iat, 300);
    // In the body (client_secret_post), with a narrower scope.
    let form = format!(
        "grant_type=client_credentials&scope=orgs&client_id={id}&client_secret={}",
        url_encode(&secret)
    );
    let r = token(&s, None, &form).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["scope"], "orgs");

    // Every wrong client: the same 401, with a Basic challenge.
    let unknown = uuid::Uuid::new_v4().to_string();
    for (who, pw) in [
        (id.as_str(), "hub_cs_wrong"),
        (unknown.as_str(), secret.as_str()),
        (public_id.as_str(), ""),
        ("not-a-uuid", secret.as_str()),
    ] {
        let r = token(&s, Some((who, pw)), "grant_type=client_credentials").await;
        assert_eq!(r.status, 401, "{who}: {:?}", r.body);
        assert_eq!(r.body["error"], "invalid_client");
        assert!(r.headers.get("www-authenticate").is_some());
    }
    let r = token(&s, None, "grant_type=client_credentials").await;
    assert_eq!(
        (r.status, r.body["error"].clone()),
        (401, json!("invalid_client"))
    );
    // Bad requests, in RFC 6749's words.
    for (form, code) in [
        ("grant_type=password", "unsupported_grant_type"),
        ("scope=orgs", "invalid_request"),
        (
            "grant_type=client_credentials&scope=openid",
            "invalid_scope",
        ),
        ("grant_type=client_credentials&scope=admin", "invalid_scope"),
        (
            "grant_type=client_credentials&grant_type=client_credentials",
            "invalid_request",
        ),
    ] {
        let r = token(&s, Some((&id, &secret)), form).await;
        assert_eq!(
            (r.status, r.body["error"].clone()),
            (400, json!(code)),
            "{form}: {:?}",
            r.body
        );
    }
    // A retired client gets nothing more.
    let retired = s
        .delete(&format!("/v1/admin/oauth-clients/{id}"), Some(&staff))
        .await;
    assert_eq!(retired.status, 204);
    let r = token(&s, Some((&id, &secret)), "grant_type=client_credentials").await;
    assert_eq!(r.status, 401, "{:?}", r.body);
}

/// A secret is base64url behind `hub_cs_`: nothing to escape but `-`/`_`,
/// which form encoding keeps.
fn url_encode(s: &str) -> String {
    assert!(s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)));
    s.to_owned()
}
