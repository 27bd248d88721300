//! The OpenID Provider's authorization code flow (issue 37), through the
//! gateway: discovery, `GET /oauth/authorize` sending the browser to the
//! console's sign-in, the console accepting on the person's behalf, the code
//! exchanged once with PKCE, ID and access tokens verified against the JWKS,
//! refresh tokens rotated with reuse detection, userinfo, introspection,
//! revocation and RP-initiated logout; and what ends a grant.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::digest;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;
use tests_e2e::{eventually, Resp, StackOptions, TestStack};

pub(crate) const CB: &str = "https://rp.example.com/cb";

/// A client that does not follow redirects (the test is the browser).
fn browser() -> reqwest::Client {
    service_kit::tls::http_client(&Default::default())
        .expect("client")
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

pub(crate) fn query(url: &str) -> HashMap<String, String> {
    reqwest::Url::parse(url)
        .expect("a URL")
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub(crate) fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, verifier.as_bytes()).as_ref())
}

/// GET /oauth/authorize with `params`: the status and the Location.
async fn authorize(s: &TestStack, params: &[(&str, &str)]) -> (u16, String, Value) {
    let q: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    let r = browser()
        .get(format!("{}/oauth/authorize?{}", s.core(), q.join("&")))
        .send()
        .await
        .expect("authorize");
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = r.json::<Value>().await.unwrap_or(Value::Null);
    (status, location, body)
}

async fn form(s: &TestStack, path: &str, basic: Option<(&str, &str)>, body: &str) -> Resp {
    let mut rb = s
        .http
        .post(format!("{}{path}", s.core()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_owned());
    if let Some((id, secret)) = basic {
        rb = rb.basic_auth(id, Some(secret));
    }
    let resp = rb.send().await.expect("POST");
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let bytes = resp.bytes().await.expect("the body");
    Resp {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        headers,
    }
}

/// The code exchanged at the token endpoint with the PKCE verifier: a public
/// client names itself, a confidential one authenticates (`basic`).
pub(crate) async fn exchange_code(
    s: &TestStack,
    client_id: &str,
    basic: Option<(&str, &str)>,
    code: &str,
    verifier: &str,
) -> Resp {
    let who = match basic {
        Some(_) => String::new(),
        None => format!("&client_id={client_id}"),
    };
    form(
        s,
        "/oauth/token",
        basic,
        &format!(
            "grant_type=authorization_code{who}&code={}&redirect_uri={}&code_verifier={}",
            enc(code),
            enc(CB),
            enc(verifier)
        ),
    )
    .await
}

/// A public client's refresh.
async fn refresh_grant(s: &TestStack, client_id: &str, refresh_token: String) -> Resp {
    form(
        s,
        "/oauth/token",
        None,
        &format!("grant_type=refresh_token&client_id={client_id}&refresh_token={refresh_token}"),
    )
    .await
}

/// A checked authorization request's handle (what the console gets).
async fn request_handle(
    s: &TestStack,
    client_id: &str,
    verifier: &str,
    extra: &[(&str, &str)],
) -> String {
    let ch = challenge(verifier);
    let mut params = vec![
        ("client_id", client_id),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("code_challenge", ch.as_str()),
        ("code_challenge_method", "S256"),
    ];
    params.extend_from_slice(extra);
    let (status, location, body) = authorize(s, &params).await;
    assert_eq!(status, 302, "{body:?}");
    query(&location)["request"].clone()
}

/// Run a request up to the console's accept; returns the redirect the
/// console would send the browser to.
pub(crate) async fn sign_in_through(
    s: &TestStack,
    client_id: &str,
    session: &str,
    verifier: &str,
    scope: &str,
    consent: bool,
) -> Resp {
    let ch = challenge(verifier);
    let (status, location, body) = authorize(
        s,
        &[
            ("client_id", client_id),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", scope),
            ("state", "st-1"),
            ("nonce", "n-1"),
            ("code_challenge", &ch),
            ("code_challenge_method", "S256"),
        ],
    )
    .await;
    assert_eq!(status, 302, "{body:?}");
    assert!(
        location.starts_with("https://app.example.com/oauth/continue?"),
        "{location}"
    );
    let handle = query(&location)["request"].clone();
    s.post(
        "/v1/oauth/authorization/accept",
        Some(session),
        json!({"request": handle, "consent": consent}),
    )
    .await
}

#[tokio::test]
async fn a_person_signs_in_to_a_product_with_the_code_flow_and_pkce() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (alice, org) = s.org_with_owner("alice@example.com").await;
    let disco = s.get("/.well-known/openid-configuration", None).await;
    assert_eq!(disco.status, 200, "{:?}", disco.body);
    assert_eq!(disco.body["issuer"], "http://localhost:8080");
    assert_eq!(
        disco.body["token_endpoint"],
        "http://localhost:8080/oauth/token"
    );
    assert_eq!(
        disco.body["code_challenge_methods_supported"],
        json!(["S256"])
    );
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Wiki", "kind": "public", "first_party": true,
                   "redirect_uris": [CB],
                   "post_logout_redirect_uris": ["https://rp.example.com/bye"],
                   "scopes": ["openid", "email", "profile", "orgs", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let id = c.text("id").to_owned();
    let jwks = s.published_keys().await;
    let keys: Vec<service_kit::jwt::PublicKey> = jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| {
            service_kit::jwt::PublicKey::from_jwk(
                k["kid"].as_str()?,
                k["crv"].as_str()?,
                k["x"].as_str()?,
                k["y"].as_str()?,
            )
        })
        .collect();

    // The whole flow: authorize, the console accepts, the code is exchanged.
    let verifier = "v".repeat(43) + "-abc";
    let acc = sign_in_through(
        &s,
        &id,
        &alice,
        &verifier,
        "openid email profile orgs offline_access",
        false,
    )
    .await;
    assert_eq!(acc.status, 200, "{:?}", acc.body);
    let back = query(acc.text("redirect_to"));
    assert!(acc.text("redirect_to").starts_with(CB));
    assert_eq!(back["state"], "st-1");
    assert_eq!(back["iss"], "http://localhost:8080");
    let code = back["code"].clone();
    let exchange = |code: String, verifier: String| {
        let id = id.clone();
        let s = &s;
        async move { exchange_code(s, &id, None, &code, &verifier).await }
    };
    // A wrong verifier is refused, and does not spend the code.
    let r = exchange(code.clone(), "w".repeat(43)).await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );
    let t = exchange(code.clone(), verifier.clone()).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let expect = |typ, aud| service_kit::jwt::Expect {
        typ,
        iss: "http://localhost:8080",
        aud,
        now: s.clock.now().unix_timestamp(),
        allow_expired: false,
    };
    let idt = service_kit::jwt::verify(t.text("id_token"), &keys, &expect("JWT", &id))
        .expect("the ID token verifies");
    assert_eq!(idt["nonce"], "n-1");
    assert_eq!(idt["email"], "alice@example.com");
    assert_eq!(idt["email_verified"], true);
    assert!(idt["auth_time"].as_i64().is_some() && idt["sid"].is_string());
    assert_eq!(idt["amr"], json!(["email"]));
    let at = service_kit::jwt::verify(
        t.text("access_token"),
        &keys,
        &expect("at+jwt", "http://localhost:8080"),
    )
    .expect("the access token verifies");
    assert_eq!(at["sub"], idt["sub"]);
    assert_eq!(at["client_id"], id.as_str());
    assert_eq!(at["orgs"], json!([{"org_id": org, "role": "owner"}]));
    assert_eq!(at["staff"], false);
    // The code is single-use: a second exchange fails and revokes the grant
    // (its refresh token stops).
    let refresh = t.text("refresh_token").to_owned();
    let r = exchange(code.clone(), verifier.clone()).await;
    assert_eq!((r.status, r.text("error")), (400, "invalid_grant"));
    let r = form(
        &s,
        "/oauth/token",
        None,
        &format!("grant_type=refresh_token&client_id={id}&refresh_token={refresh}"),
    )
    .await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );

    // A new grant: refresh rotates; the old token reused revokes the family.
    let verifier = "x".repeat(60);
    let acc = sign_in_through(
        &s,
        &id,
        &alice,
        &verifier,
        "openid email orgs offline_access",
        false,
    )
    .await;
    let t = exchange(query(acc.text("redirect_to"))["code"].clone(), verifier).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let rt1 = t.text("refresh_token").to_owned();
    let refresh_with = |rt: String| refresh_grant(&s, &id, rt);
    let r = refresh_with(rt1.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let rt2 = r.text("refresh_token").to_owned();
    assert_ne!(rt1, rt2);
    let access = r.text("access_token").to_owned();
    // userinfo with the access token, through the gateway.
    let ui = s
        .http
        .get(format!("{}/oauth/userinfo", s.core()))
        .bearer_auth(&access)
        .send()
        .await
        .expect("userinfo");
    assert_eq!(ui.status(), 200);
    let ui: Value = ui.json().await.expect("JSON");
    assert_eq!(ui["email"], "alice@example.com");
    assert_eq!(ui["sub"], at["sub"]);
    assert!(ui["name"].is_null(), "profile was not asked for: {ui:?}");
    let r = refresh_with(rt2.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let rt3 = r.text("refresh_token").to_owned();
    // rt1 again: reuse. The family is revoked: rt3 stops too.
    let r = refresh_with(rt1).await;
    assert_eq!((r.status, r.text("error")), (400, "invalid_grant"));
    let r = refresh_with(rt3).await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );
    // The family's access tokens end with it.
    let ui = s
        .http
        .get(format!("{}/oauth/userinfo", s.core()))
        .bearer_auth(&access)
        .send()
        .await
        .expect("userinfo");
    assert_eq!(ui.status(), 401);
    assert_eq!(s.get("/v1/profile", Some(&access)).await.status, 401);

    // Two uses of one refresh token at the same time: exactly one wins, the
    // other is a reuse, and the family ends (the winner's new token too).
    let verifier = "r".repeat(50);
    let acc = sign_in_through(&s, &id, &alice, &verifier, "openid offline_access", false).await;
    let t = exchange(query(acc.text("redirect_to"))["code"].clone(), verifier).await;
    let rt = t.text("refresh_token").to_owned();
    let (a, b) = tokio::join!(refresh_with(rt.clone()), refresh_with(rt.clone()));
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 400], "{:?} {:?}", a.body, b.body);
    let winner = if a.status == 200 { a } else { b };
    let r = refresh_with(winner.text("refresh_token").to_owned()).await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );

    // Negative table of the authorization request: before the redirect URI
    // is known good, 400 here; after it, an error sent to the client.
    let ch = challenge(&"y".repeat(43));
    let base = [
        ("client_id", id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("state", "s2"),
        ("code_challenge", ch.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let with = |k: &'static str, v: Option<&'static str>| {
        let mut p: Vec<(&str, &str)> = base.iter().filter(|(n, _)| *n != k).cloned().collect();
        if let Some(v) = v {
            p.push((k, v));
        }
        p
    };
    for (p, why) in [
        (
            with("redirect_uri", Some("https://rp.example.com/cb/")),
            "a near redirect URI",
        ),
        (
            with("redirect_uri", Some("https://evil.example.com/cb")),
            "a foreign redirect URI",
        ),
        (with("redirect_uri", None), "no redirect URI"),
        (
            with("client_id", Some("00000000-0000-0000-0000-000000000000")),
            "an unknown client",
        ),
    ] {
        let (status, location, _) = authorize(&s, &p).await;
        assert_eq!((status, location.as_str()), (400, ""), "{why}");
    }
    for (p, err) in [
        (with("code_challenge_method", None), "invalid_request"),
        (
            with("code_challenge_method", Some("plain")),
            "invalid_request",
        ),
        (with("code_challenge", None), "invalid_request"),
        (
            with("response_type", Some("token")),
            "unsupported_response_type",
        ),
        (with("scope", Some("openid admin")), "invalid_scope"),
        (with("prompt", Some("none")), "login_required"),
    ] {
        let (status, location, _) = authorize(&s, &p).await;
        assert_eq!(status, 302, "{err}");
        assert!(location.starts_with(CB), "{location}");
        let q = query(&location);
        assert_eq!((q["error"].as_str(), q["state"].as_str()), (err, "s2"));
        assert_eq!(q["iss"], "http://localhost:8080");
    }

    // RP-initiated logout by a first-party client ends the hub session.
    let verifier = "l".repeat(43);
    let acc = sign_in_through(&s, &id, &alice, &verifier, "openid", false).await;
    let t = exchange(query(acc.text("redirect_to"))["code"].clone(), verifier).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let r = browser()
        .get(format!(
            "{}/oauth/logout?id_token_hint={}&post_logout_redirect_uri={}",
            s.core(),
            t.text("id_token"),
            enc("https://rp.example.com/bye")
        ))
        .send()
        .await
        .expect("logout");
    assert_eq!(r.status(), 302);
    // The gateway forgets its cached identity when the revocation event
    // arrives (asynchronous): wait for it rather than race it.
    let ended = eventually(Duration::from_secs(10), || async {
        (s.get("/v1/auth/me", Some(&alice)).await.status == 401).then_some(())
    })
    .await;
    assert!(
        ended.is_some(),
        "the hub session outlived RP-initiated logout"
    );
    let alice = s.sign_in("alice@example.com").await;

    // An expired code.
    let verifier = "z".repeat(50);
    let acc = sign_in_through(&s, &id, &alice, &verifier, "openid", false).await;
    let code = query(acc.text("redirect_to"))["code"].clone();
    s.clock.advance(time::Duration::seconds(61));
    let r = exchange(code, verifier).await;
    assert_eq!((r.status, r.text("error")), (400, "invalid_grant"));
    assert!(
        r.text("error_description").contains("expired"),
        "{:?}",
        r.body
    );
}

/// Refreshes are applied many to a statement (group commit): a wave of
/// concurrent refreshes of many grants, one of them used twice at once,
/// leaves every other family rotated and alive, and ends only the reused one.
#[tokio::test]
async fn concurrent_refreshes_of_many_grants_stand_alone_in_their_batches() {
    const GRANTS: usize = 12;
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (alice, _) = s.org_with_owner("alice-batch@example.com").await;
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Batch", "kind": "public", "first_party": true,
                   "redirect_uris": [CB], "scopes": ["openid", "email", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let id = c.text("id").to_owned();
    // Every other grant with another scope: each answer must be its own
    // grant's.
    let scope = |i: usize| {
        if i.is_multiple_of(2) {
            "openid offline_access"
        } else {
            "openid email offline_access"
        }
    };
    let mut tokens = Vec::new();
    for i in 0..GRANTS {
        let verifier = format!("{i:02}").repeat(30);
        let acc = sign_in_through(&s, &id, &alice, &verifier, scope(i), false).await;
        assert_eq!(acc.status, 200, "{:?}", acc.body);
        let code = query(acc.text("redirect_to"))["code"].clone();
        let t = exchange_code(&s, &id, None, &code, &verifier).await;
        assert_eq!(t.status, 200, "{:?}", t.body);
        tokens.push(t.text("refresh_token").to_owned());
    }
    let refresh = |rt: String| refresh_grant(&s, &id, rt);
    // One wave: every token once, and the first a second time.
    let mut wave: Vec<_> = tokens.iter().cloned().map(&refresh).collect();
    wave.push(refresh(tokens[0].clone()));
    let answers = futures::future::join_all(wave).await;
    let (twice, once) = ([&answers[0], &answers[GRANTS]], &answers[1..GRANTS]);
    let mut statuses = [twice[0].status, twice[1].status];
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [200, 400],
        "{:?} {:?}",
        twice[0].body,
        twice[1].body
    );
    let mut next = Vec::new();
    for (i, a) in once.iter().enumerate() {
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(a.text("scope"), scope(i + 1), "{:?}", a.body);
        next.push(a.text("refresh_token").to_owned());
    }
    // The reused family is over: its winner's new token is refused.
    let winner = twice.iter().find(|a| a.status == 200).expect("a winner");
    let r = refresh(winner.text("refresh_token").to_owned()).await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );
    // Every other family goes on with the token its refresh gave, and its
    // spent token is a reuse.
    let again = futures::future::join_all(next.iter().cloned().map(&refresh)).await;
    for (i, (a, rt)) in again.iter().zip(&next).enumerate() {
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(a.text("scope"), scope(i + 1), "{:?}", a.body);
        assert_ne!(a.text("refresh_token"), rt.as_str());
    }
    let r = refresh(tokens[1].clone()).await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );
}

/// The refresh grant's hot path authenticates clients from copies it keeps
/// a while: a rotated secret and a retired client are seen at the very next
/// refresh all the same (the statement checks the copy is current).
#[tokio::test]
async fn a_rotated_secret_and_a_retired_client_stop_refreshes_at_once() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (alice, _) = s.org_with_owner("alice-rotate@example.com").await;
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Backend", "kind": "confidential", "first_party": true,
                   "redirect_uris": [CB], "scopes": ["openid", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let (id, secret) = (c.text("id").to_owned(), c.text("client_secret").to_owned());
    let verifier = "q".repeat(48);
    let acc = sign_in_through(&s, &id, &alice, &verifier, "openid offline_access", false).await;
    let code = query(acc.text("redirect_to"))["code"].clone();
    let t = exchange_code(&s, &id, Some((&id, &secret)), &code, &verifier).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let refresh = |secret: String, rt: String| {
        let id = id.clone();
        let s = &s;
        async move {
            form(
                s,
                "/oauth/token",
                Some((&id, &secret)),
                &format!("grant_type=refresh_token&refresh_token={rt}"),
            )
            .await
        }
    };
    // Twice with the secret: the client's copy is kept.
    let r = refresh(secret.clone(), t.text("refresh_token").to_owned()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = refresh(secret.clone(), r.text("refresh_token").to_owned()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut rt = r.text("refresh_token").to_owned();
    // The secret is rotated: the old one is refused at once (and spends
    // nothing), the new one works.
    let p = s
        .patch(
            &format!("/v1/admin/oauth-clients/{id}"),
            Some(&staff),
            json!({"rotate_secret": true}),
        )
        .await;
    assert_eq!(p.status, 200, "{:?}", p.body);
    let rotated = p.text("client_secret").to_owned();
    let r = refresh(secret.clone(), rt.clone()).await;
    assert_eq!(
        (r.status, r.text("error")),
        (401, "invalid_client"),
        "{:?}",
        r.body
    );
    let r = refresh(rotated.clone(), rt.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    rt = r.text("refresh_token").to_owned();
    let r = refresh(rotated.clone(), rt.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    rt = r.text("refresh_token").to_owned();
    // Retired: refused at once.
    let d = s
        .delete(&format!("/v1/admin/oauth-clients/{id}"), Some(&staff))
        .await;
    assert!(d.status < 300, "{:?}", d.body);
    let r = refresh(rotated, rt).await;
    assert_eq!(
        (r.status, r.text("error")),
        (401, "invalid_client"),
        "{:?}",
        r.body
    );
}

#[tokio::test]
async fn consent_revocation_introspection_logout_and_a_disabled_person() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let bob = s.sign_in("bob@example.com").await;
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Grafana", "kind": "confidential",
                   "redirect_uris": [CB],
                   "post_logout_redirect_uris": ["https://rp.example.com/bye"],
                   "scopes": ["openid", "email", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let (id, secret) = (c.text("id").to_owned(), c.text("client_secret").to_owned());
    s.published_keys().await;

    // A handle is its first reader's: another person's session gets 404.
    let handle = request_handle(&s, &id, &"h".repeat(43), &[]).await;
    let show = s
        .post(
            "/v1/oauth/authorization",
            Some(&bob),
            json!({"request": handle}),
        )
        .await;
    assert_eq!(show.status, 200, "{:?}", show.body);
    assert_eq!(show.body["scopes"], json!(["openid"]));
    assert_eq!(
        show.body["consent_required"], false,
        "openid alone needs none"
    );
    assert_eq!(show.body["client"]["name"], "Grafana");
    for path in ["/v1/oauth/authorization", "/v1/oauth/authorization/accept"] {
        let r = s
            .post(
                path,
                Some(&staff),
                json!({"request": handle, "consent": true}),
            )
            .await;
        assert_eq!(r.status, 404, "{path}: {:?}", r.body);
    }
    let r = s
        .post(
            "/v1/oauth/authorization/reject",
            Some(&bob),
            json!({"request": handle}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(query(r.text("redirect_to"))["error"], "access_denied");

    // prompt=login wants a sign-in made for the request: an older session is
    // refused, a new one goes through.
    let handle = request_handle(&s, &id, &"p".repeat(43), &[("prompt", "login")]).await;
    let r = s
        .post(
            "/v1/oauth/authorization/accept",
            Some(&bob),
            json!({"request": handle, "consent": true}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    let bob_again = s.sign_in("bob@example.com").await;
    let r = s
        .post(
            "/v1/oauth/authorization/accept",
            Some(&bob_again),
            json!({"request": handle, "consent": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // A third-party client: consent first, once per scope set.
    let verifier = "c".repeat(43);
    let r = sign_in_through(
        &s,
        &id,
        &bob,
        &verifier,
        "openid email offline_access",
        false,
    )
    .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    let r = sign_in_through(
        &s,
        &id,
        &bob,
        &verifier,
        "openid email offline_access",
        true,
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let code = query(r.text("redirect_to"))["code"].clone();
    let again = sign_in_through(&s, &id, &bob, &verifier, "openid email", false).await;
    assert_eq!(again.status, 200, "consent is remembered: {:?}", again.body);
    // The confidential client must authenticate.
    let r = exchange_code(&s, &id, Some((&id, "hub_cs_wrong")), &code, &verifier).await;
    assert_eq!((r.status, r.text("error")), (401, "invalid_client"));
    let t = exchange_code(&s, &id, Some((&id, &secret)), &code, &verifier).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let (access, refresh, id_token) = (
        t.text("access_token").to_owned(),
        t.text("refresh_token").to_owned(),
        t.text("id_token").to_owned(),
    );

    // Introspection: both tokens active while the session lives.
    let intro = |tok: String| {
        let (id, secret, s) = (id.clone(), secret.clone(), &s);
        async move {
            form(
                s,
                "/oauth/introspect",
                Some((&id, &secret)),
                &format!("token={}", enc(&tok)),
            )
            .await
        }
    };
    let r = intro(access.clone()).await;
    assert_eq!(
        (r.status, r.body["active"].clone()),
        (200, json!(true)),
        "{:?}",
        r.body
    );
    assert_eq!(r.body["client_id"], id.as_str());
    assert_eq!(intro(refresh.clone()).await.body["active"], true);
    assert_eq!(intro("garbage".into()).await.body["active"], false);

    // Revocation ends the grant: the refresh token is inactive and refused.
    let r = form(
        &s,
        "/oauth/revoke",
        Some((&id, &secret)),
        &format!("token={refresh}"),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(intro(refresh.clone()).await.body["active"], false);
    let r = form(
        &s,
        "/oauth/token",
        Some((&id, &secret)),
        &format!("grant_type=refresh_token&refresh_token={refresh}"),
    )
    .await;
    assert_eq!((r.status, r.text("error")), (400, "invalid_grant"));

    // RP-initiated logout by a third-party client signs the person out of
    // that client only: its grants end (the access token is inactive), the
    // hub session stays; the browser goes to the registered URI.
    let (status, location, _) = {
        let r = browser()
            .get(format!(
                "{}/oauth/logout?id_token_hint={id_token}&post_logout_redirect_uri={}&state=bye1",
                s.core(),
                enc("https://rp.example.com/bye")
            ))
            .send()
            .await
            .expect("logout");
        let st = r.status().as_u16();
        let loc = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        (st, loc, ())
    };
    assert_eq!(status, 302);
    assert_eq!(location, "https://rp.example.com/bye?state=bye1");
    assert_eq!(intro(access).await.body["active"], false);
    assert_eq!(s.get("/v1/auth/me", Some(&bob)).await.status, 200);

    // A disabled person: refresh stops at once.
    let carol = s.sign_in("carol@example.com").await;
    let carol_id = s
        .get("/v1/auth/me", Some(&carol))
        .await
        .text("user_id")
        .to_owned();
    let verifier = "d".repeat(43);
    let r = sign_in_through(&s, &id, &carol, &verifier, "openid offline_access", true).await;
    let code = query(r.text("redirect_to"))["code"].clone();
    let t = exchange_code(&s, &id, Some((&id, &secret)), &code, &verifier).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let rt = t.text("refresh_token").to_owned();
    let r = s
        .post(
            &format!("/v1/admin/users/{carol_id}/disable"),
            Some(&staff),
            json!({"reason": "test"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = form(
        &s,
        "/oauth/token",
        Some((&id, &secret)),
        &format!("grant_type=refresh_token&refresh_token={rt}"),
    )
    .await;
    assert_eq!(
        (r.status, r.text("error")),
        (400, "invalid_grant"),
        "{:?}",
        r.body
    );
}

/// A JWT with `header` and `claims`, signed by a key of its own (not the
/// provider's), or unsigned when `sign` is false.
fn forged(header: &Value, claims: &Value, sign: bool) -> String {
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(header).expect("JSON")),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("JSON"))
    );
    if !sign {
        return format!("{input}.");
    }
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("key");
    let sig = pair.sign(&rng, input.as_bytes()).expect("sign");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

pub(crate) fn decode(part: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("JSON")
}

#[tokio::test]
async fn access_tokens_are_bearers_at_the_gateway_within_their_organizations() {
    let s = TestStack::spawn_with(tests_e2e::StackOptions {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let (dana, org_a) = s.org_with_owner("dana@example.com").await;
    let org_b = s.create_org(&dana, "Other", "TR").await;
    assert_eq!(org_b.status, 201, "{:?}", org_b.body);
    let org_b = org_b.text("id").to_owned();
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "Dashboard", "kind": "public", "first_party": true,
                   "redirect_uris": [CB], "scopes": ["openid", "email", "orgs"],
                   "allowed_org_ids": [org_a]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let id = c.text("id").to_owned();
    s.published_keys().await;
    let access_token = |scope: &'static str| {
        let (id, dana, s) = (id.clone(), dana.clone(), &s);
        async move {
            let verifier = "a".repeat(50);
            let r = sign_in_through(s, &id, &dana, &verifier, scope, false).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            let code = query(r.text("redirect_to"))["code"].clone();
            let t = exchange_code(s, &id, None, &code, &verifier).await;
            assert_eq!(t.status, 200, "{:?}", t.body);
            t.text("access_token").to_owned()
        }
    };
    let jwt = access_token("openid email orgs").await;

    // The person, through the gateway, with the token as a bearer.
    let me = s.get("/v1/profile", Some(&jwt)).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(
        me.body["email"],
        s.get("/v1/profile", Some(&dana)).await.body["email"]
    );
    assert_eq!(
        s.get(&format!("/v1/organizations/{org_a}"), Some(&jwt))
            .await
            .status,
        200
    );
    // Only the organizations the token lists (the client is limited to A).
    assert_eq!(
        s.get(&format!("/v1/organizations/{org_b}"), Some(&dana))
            .await
            .status,
        200
    );
    let other = s
        .get(&format!("/v1/organizations/{org_b}"), Some(&jwt))
        .await;
    assert!(matches!(other.status, 403 | 404), "{other:?}");
    // Without the orgs scope, no organization at all.
    let narrow = access_token("openid email").await;
    let r = s
        .get(&format!("/v1/organizations/{org_a}"), Some(&narrow))
        .await;
    assert!(matches!(r.status, 403 | 404), "{r:?}");
    // Not a session: what needs one refuses it.
    assert_eq!(s.delete("/v1/auth/me", Some(&jwt)).await.status, 401);

    // Forgeries: unsigned, signed by another key under the provider's kid,
    // an expired claim, another issuer.
    let parts: Vec<&str> = jwt.split('.').collect();
    let (header, claims) = (decode(parts[0]), decode(parts[1]));
    let mut none = header.clone();
    none["alg"] = json!("none");
    let mut expired = claims.clone();
    expired["exp"] = json!(claims["iat"].as_i64().expect("iat") - 1);
    let mut foreign = claims.clone();
    foreign["iss"] = json!("https://evil.example.com");
    for (bad, why) in [
        (forged(&none, &claims, false), "alg none"),
        (forged(&header, &claims, true), "another key"),
        (forged(&header, &expired, true), "expired, another key"),
        (
            format!(
                "{}.{}.{}",
                parts[0],
                URL_SAFE_NO_PAD.encode(serde_json::to_vec(&foreign).expect("JSON")),
                parts[2]
            ),
            "a changed issuer",
        ),
    ] {
        assert_eq!(s.get("/v1/profile", Some(&bad)).await.status, 401, "{why}");
    }

    // Revoking the session ends the token at once, on the other gateway
    // replica that cached it too (the revocation event names the session).
    let g1 = s.gateways[1].core.clone();
    let on_g1 = |t: String| {
        let (s, g1) = (&s, g1.clone());
        async move {
            s.call("GET", &format!("{g1}/v1/profile"), Some(&t), None, &[])
                .await
                .status
        }
    };
    assert_eq!(on_g1(jwt.clone()).await, 200);
    let dana2 = s.sign_in("dana@example.com").await;
    let sid = claims["sid"].as_str().expect("sid").to_owned();
    let r = s
        .delete(&format!("/v1/auth/sessions/{sid}"), Some(&dana2))
        .await;
    assert!(matches!(r.status, 200 | 204), "{r:?}");
    let ended = eventually(Duration::from_secs(10), || async {
        (on_g1(jwt.clone()).await == 401).then_some(())
    })
    .await;
    assert!(
        ended.is_some(),
        "the access token outlived its session on replica 1"
    );
    assert_eq!(s.get("/v1/profile", Some(&jwt)).await.status, 401);

    // A disabled person's token is refused (a member of the client's
    // organization: others are refused the code).
    let dana = s.sign_in("dana@example.com").await;
    let added = s
        .add_member(&dana, &org_a, "erin@example.com", "developer")
        .await;
    assert_eq!(added.status, 200, "{:?}", added.body);
    let erin = s.sign_in("erin@example.com").await;
    let erin_id = s
        .get("/v1/auth/me", Some(&erin))
        .await
        .text("user_id")
        .to_owned();
    let verifier = "e".repeat(50);
    let r = sign_in_through(&s, &id, &erin, &verifier, "openid", false).await;
    let code = query(r.text("redirect_to"))["code"].clone();
    let t = exchange_code(&s, &id, None, &code, &verifier).await;
    let erin_jwt = t.text("access_token").to_owned();
    assert_eq!(s.get("/v1/profile", Some(&erin_jwt)).await.status, 200);
    let r = s
        .post(
            &format!("/v1/admin/users/{erin_id}/disable"),
            Some(&staff),
            json!({"reason": "test"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let refused = eventually(Duration::from_secs(10), || async {
        (s.get("/v1/profile", Some(&erin_jwt)).await.status == 401).then_some(())
    })
    .await;
    assert!(refused.is_some(), "a disabled person's token still works");

    // Past its life, a token is refused by a gateway that never saw it
    // (nothing cached there: identity checks `exp` on its clock). It worked
    // on the other replica before.
    let verifier = "f".repeat(50);
    let r = sign_in_through(&s, &id, &dana, &verifier, "openid", false).await;
    let code = query(r.text("redirect_to"))["code"].clone();
    let t = exchange_code(&s, &id, None, &code, &verifier).await;
    let fresh = t.text("access_token").to_owned();
    assert_eq!(on_g1(fresh.clone()).await, 200);
    s.clock.advance(time::Duration::seconds(300 + 1));
    assert_eq!(s.get("/v1/profile", Some(&fresh)).await.status, 401);
}

#[tokio::test]
async fn a_command_line_tool_signs_in_with_the_device_grant() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let fay = s.sign_in("fay@example.com").await;
    let c = s
        .post(
            "/v1/admin/oauth-clients",
            Some(&staff),
            json!({"name": "hub-cli", "kind": "public",
                   "redirect_uris": ["http://127.0.0.1/cb"],
                   "scopes": ["openid", "email", "offline_access"]}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let id = c.text("id").to_owned();
    s.published_keys().await;
    let disco = s.get("/.well-known/openid-configuration", None).await;
    assert_eq!(
        disco.body["device_authorization_endpoint"],
        "http://localhost:8080/oauth/device_authorization"
    );
    let start = |scope: &'static str| {
        let (s, id) = (&s, id.clone());
        async move {
            form(
                s,
                "/oauth/device_authorization",
                None,
                &format!("client_id={id}&scope={}", enc(scope)),
            )
            .await
        }
    };
    let poll = |device: String| {
        let (s, id) = (&s, id.clone());
        async move {
            form(
                s,
                "/oauth/token",
                None,
                &format!(
                    "grant_type={}&client_id={id}&device_code={device}",
                    enc("urn:ietf:params:oauth:grant-type:device_code")
                ),
            )
            .await
        }
    };
    let d = start("openid email offline_access").await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    assert_eq!(d.body["verification_uri"], "https://app.example.com/device");
    assert_eq!(d.body["interval"], 5);
    let user_code = d.text("user_code").to_owned();
    assert_eq!(user_code.len(), 9, "XXXX-XXXX: {user_code}");
    let device = d.text("device_code").to_owned();
    assert_eq!(
        d.body["verification_uri_complete"],
        format!("https://app.example.com/device?user_code={user_code}")
    );

    // Before the person answers: pending; polling too fast: slow_down.
    let r = poll(device.clone()).await;
    assert_eq!((r.status, r.text("error")), (400, "authorization_pending"));
    let r = poll(device.clone()).await;
    assert_eq!((r.status, r.text("error")), (400, "slow_down"));
    s.clock.advance(time::Duration::seconds(11));

    // The person types the code (any case, with or without the dash).
    let typed = user_code.replace('-', "").to_lowercase();
    let show = s
        .post("/v1/oauth/device", Some(&fay), json!({"user_code": typed}))
        .await;
    assert_eq!(show.status, 200, "{:?}", show.body);
    assert_eq!(show.body["client"]["name"], "hub-cli");
    assert_eq!(show.body["consent_required"], true);
    let r = s
        .post(
            "/v1/oauth/device/accept",
            Some(&fay),
            json!({"user_code": user_code}),
        )
        .await;
    assert_eq!(
        r.status, 409,
        "a third-party client needs consent: {:?}",
        r.body
    );
    let r = s
        .post(
            "/v1/oauth/device/accept",
            Some(&fay),
            json!({"user_code": user_code, "consent": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Answered: the code is no one's any more.
    let r = s
        .post(
            "/v1/oauth/device",
            Some(&fay),
            json!({"user_code": user_code}),
        )
        .await;
    assert_eq!(r.status, 404);

    let t = poll(device.clone()).await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    let ui = s
        .http
        .get(format!("{}/oauth/userinfo", s.core()))
        .bearer_auth(t.text("access_token"))
        .send()
        .await
        .expect("userinfo");
    let ui: Value = ui.json().await.expect("JSON");
    assert_eq!(ui["email"], "fay@example.com");
    assert!(t.body["refresh_token"].is_string());
    // Once.
    s.clock.advance(time::Duration::seconds(11));
    let r = poll(device).await;
    assert_eq!((r.status, r.text("error")), (400, "invalid_grant"));

    // Refused: access_denied. Expired: expired_token. Not a code: 404.
    let d = start("openid").await;
    let r = s
        .post(
            "/v1/oauth/device/reject",
            Some(&fay),
            json!({"user_code": d.text("user_code")}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = poll(d.text("device_code").to_owned()).await;
    assert_eq!((r.status, r.text("error")), (400, "access_denied"));
    let d = start("openid").await;
    s.clock.advance(time::Duration::seconds(601));
    let r = poll(d.text("device_code").to_owned()).await;
    assert_eq!((r.status, r.text("error")), (400, "expired_token"));
    let r = s
        .post(
            "/v1/oauth/device",
            Some(&fay),
            json!({"user_code": "AEIO-UAEI"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = start("openid admin").await;
    assert_eq!((r.status, r.text("error")), (400, "invalid_scope"));
}

#[tokio::test]
async fn one_address_makes_a_bounded_number_of_authorization_requests() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[oidc]\nauthorize_per_ip_per_minute = 3\n".to_owned(),
        ..Default::default()
    })
    .await;
    let from = |ip: &'static str| {
        let s = &s;
        async move {
            s.call(
                "GET",
                &format!(
                    "{}/oauth/authorize?client_id=nope&response_type=code",
                    s.core()
                ),
                None,
                None,
                &[("x-forwarded-for", ip)],
            )
            .await
        }
    };
    // Refused requests count too (each costs a lookup).
    for _ in 0..3 {
        assert_eq!(from("203.0.113.7").await.status, 400);
    }
    let r = from("203.0.113.7").await;
    assert_eq!(
        (r.status, r.body["error"].as_str()),
        (429, Some("temporarily_unavailable")),
        "{:?}",
        r.body
    );
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("60")
    );
    // Another address is not held back; a minute later this one is not either.
    assert_eq!(from("203.0.113.8").await.status, 400);
    s.clock.advance(time::Duration::seconds(61));
    assert_eq!(from("203.0.113.7").await.status, 400);
}
