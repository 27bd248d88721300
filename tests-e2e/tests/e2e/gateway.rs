use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use futures::future::join_all;
use serde_json::json;
use service_kit::assertion::{sha256_hex, Assertion, Minter};
use std::time::Duration;
use tests_e2e::{StackOptions, TestStack};

fn minter(iss: &str, aud: &str, key: &str) -> Minter {
    Minter::new(iss, aud, &secrecy::SecretString::from(key.to_owned())).expect("minter")
}

/// An assertion as the gateway builds it, for a request with no identity.
fn assertion(iss: &str, aud: &str, method: &str, path: &str, body: &[u8], iat: i64) -> Assertion {
    Assertion {
        iss: iss.into(),
        aud: aud.into(),
        identity: None,
        credential: None,
        memberships_truncated: false,
        ip: "127.0.0.1".into(),
        request_id: "r".into(),
        jti: uuid::Uuid::new_v4(),
        method: method.into(),
        path: path.into(),
        body_sha256: sha256_hex(body),
        idempotency_key: None,
        iat,
        deadline_ms: None,
    }
}

#[tokio::test]
async fn both_hosts_answer_healthz() {
    let s = TestStack::spawn().await;
    for base in [s.core(), s.product()] {
        let r = s
            .call("GET", &format!("{base}/healthz"), None, None, &[])
            .await;
        assert_eq!(r.status, 200, "{base}");
        let r = s
            .call("GET", &format!("{base}/readyz"), None, None, &[])
            .await;
        assert_eq!(r.status, 200, "{base}");
    }
}

#[tokio::test]
async fn the_product_host_serves_core_paths_under_core_api() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("brand@example.com").await;
    let core = s.get("/v1/auth/me", Some(&t)).await;
    let brand = s
        .call(
            "GET",
            &format!("{}/core-api/v1/auth/me", s.product()),
            Some(&t),
            None,
            &[],
        )
        .await;
    assert_eq!(brand.status, 200);
    assert_eq!(brand.body, core.body);
    let profile = s
        .call(
            "GET",
            &format!("{}/core-api/v1/profile", s.product()),
            Some(&t),
            None,
            &[],
        )
        .await;
    assert_eq!(profile.status, 200);
    assert_eq!(profile.body["email"], "brand@example.com");
    // Public endpoints work there too.
    let link = s
        .call(
            "POST",
            &format!("{}/core-api/v1/auth/request-link", s.product()),
            None,
            Some(json!({"email": "brand2@example.com"})),
            &[],
        )
        .await;
    assert_eq!(link.status, 200);
    // Core paths are not served at the product host's root, nor product paths on the core host.
    let bare = s
        .call(
            "GET",
            &format!("{}/v1/auth/me", s.product()),
            Some(&t),
            None,
            &[],
        )
        .await;
    assert_eq!(bare.status, 404);
    let servers = s.get("/v1/servers", Some(&t)).await;
    assert_eq!(servers.status, 404);
}

#[tokio::test]
async fn routes_of_services_not_deployed_answer_503_after_authentication() {
    // A gateway without an upstream for the agent (one not deployed).
    let s = TestStack::spawn_with(tests_e2e::StackOptions {
        gateway_toml: "[upstreams]\nagent = \"\"\n".into(),
        ..Default::default()
    })
    .await;
    let t = s.sign_in("early@example.com").await;
    assert_eq!(s.get("/v1/agent", None).await.status, 401);
    let r = s.get("/v1/agent", Some(&t)).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.error(), "service not available");
}

#[tokio::test]
async fn spoofed_identity_headers_are_ignored() {
    let s = TestStack::spawn().await;
    let victim = s.sign_in("victim@example.com").await;
    let victim_id = s.get("/v1/auth/me", Some(&victim)).await.body["user_id"].clone();
    let attacker = s.sign_in("attacker@example.com").await;
    // A forged assertion claiming to be the victim, plus assorted identity headers.
    let forged = URL_SAFE_NO_PAD.encode(
        json!({"identity": {"user_id": victim_id, "email": "victim@example.com", "name": "",
               "staff": true, "memberships": []}, "credential": null, "ip": "1.1.1.1",
               "request_id": "x", "method": "GET", "path": "/v1/profile", "iat": 0})
        .to_string(),
    );
    let spoof = [
        ("x-hub-assertion", forged.as_str()),
        ("x-hub-signature", "00"),
        ("x-identity", "victim@example.com"),
        ("x-user-id", "1"),
    ];
    let r = s
        .call(
            "GET",
            &format!("{}/v1/profile", s.core()),
            Some(&attacker),
            None,
            &spoof,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["email"], "attacker@example.com");
    let anon = s
        .call(
            "GET",
            &format!("{}/v1/profile", s.core()),
            None,
            None,
            &spoof,
        )
        .await;
    assert_eq!(anon.status, 401);
    let me = s
        .call(
            "GET",
            &format!("{}/v1/auth/me", s.core()),
            Some(&attacker),
            None,
            &spoof,
        )
        .await;
    assert_eq!(me.body["email"], "attacker@example.com");
    assert_eq!(me.body["staff"], false);
}

#[tokio::test]
async fn services_refuse_requests_that_did_not_come_through_the_gateway() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("direct@example.com").await;
    let direct = |path: &str| format!("{}{path}", s.service_url("identity"));
    let r = s
        .call("GET", &direct("/v1/profile"), Some(&t), None, &[])
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.error(), "requests must come through the gateway");
    let r = s
        .call("GET", &direct("/v1/auth/me"), Some(&t), None, &[])
        .await;
    assert_eq!(r.status, 401);
    let r = s
        .call(
            "POST",
            &direct("/v1/auth/request-link"),
            None,
            Some(json!({"email": "x@example.com"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 401);

    // Signed with another key, or for another request: refused too.
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let gateway = |key: &str| minter("gateway", "identity", key);
    let me = |key: &str, path: &str, iat: i64| {
        gateway(key).sign_assertion(&assertion("gateway", "identity", "GET", path, b"", iat))
    };
    let send = |(p, sig): (String, String)| {
        let url = direct("/v1/auth/me");
        let t = t.clone();
        let s = &s;
        async move {
            s.call(
                "GET",
                &url,
                Some(&t),
                None,
                &[("x-hub-assertion", &p), ("x-hub-signature", &sig)],
            )
            .await
        }
    };
    let r = send(me("a-key-that-is-not-the-internal-one", "/v1/auth/me", now)).await;
    assert_eq!(
        (r.status, r.error()),
        (401, "invalid gateway assertion signature")
    );
    let r = send(me(&s.assertion_key, "/v1/profile", now)).await;
    assert_eq!(
        (r.status, r.error()),
        (401, "gateway assertion does not match this request")
    );
    let r = send(me(&s.assertion_key, "/v1/auth/me", now - 3600)).await;
    assert_eq!((r.status, r.error()), (401, "gateway assertion expired"));
    // The right key, request and time: accepted (this is what the gateway does),
    // once.
    let good = me(&s.assertion_key, "/v1/auth/me", now);
    let r = send(good.clone()).await;
    assert_eq!(r.status, 200);
    let r = send(good).await;
    assert_eq!(
        (r.status, r.error()),
        (401, "gateway assertion already used")
    );
    // identity's probes need no assertion.
    assert_eq!(
        s.call("GET", &direct("/healthz"), None, None, &[])
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn the_gateway_fails_closed_when_identity_is_unreachable() {
    let s = TestStack::spawn_with(StackOptions {
        gateways: 2,
        gateway_toml: String::new(),
        ..Default::default()
    })
    .await;
    let t = s.sign_in("closed@example.com").await;
    // A third gateway whose identity address answers nothing.
    let broken = TestStack::spawn_with(StackOptions {
        gateway_toml: "[upstreams]\nidentity = \"http://127.0.0.1:9\"\n".into(),
        ..Default::default()
    })
    .await;
    let r = broken.get("/v1/auth/me", Some(&t)).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.error(), "identity service unavailable");
    let r = broken.get("/v1/profile", Some(&t)).await;
    assert_eq!(r.status, 503);
    // Without a token it is still a 401, decided by the gateway alone.
    assert_eq!(broken.get("/v1/profile", None).await.status, 401);
}

#[tokio::test]
async fn client_ip_comes_from_x_forwarded_for_only_behind_a_trusted_proxy() {
    // Trusted loopback (the default here): the forwarded address is the client.
    let s = TestStack::spawn().await;
    let t = s.sign_in("ip@example.com").await;
    let r = s
        .call(
            "PATCH",
            &format!("{}/v1/auth/me", s.core()),
            Some(&t),
            Some(json!({"name": "IP"})),
            &[("x-forwarded-for", "198.51.100.23")],
        )
        .await;
    assert_eq!(r.status, 200);
    let log = s.get("/v1/audit/me", Some(&t)).await;
    assert_eq!(log.body[0]["ip"], "198.51.100.23");

    // Nothing trusted: the TCP peer is the client whatever the header says.
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: "[proxy]\ntrusted_proxies = []\n".into(),
        ..Default::default()
    })
    .await;
    let t = s.sign_in("ip2@example.com").await;
    s.call(
        "PATCH",
        &format!("{}/v1/auth/me", s.core()),
        Some(&t),
        Some(json!({"name": "IP"})),
        &[("x-forwarded-for", "198.51.100.23")],
    )
    .await;
    let log = s.get("/v1/audit/me", Some(&t)).await;
    assert_eq!(log.body[0]["ip"], "127.0.0.1");
}

#[tokio::test]
async fn request_ids_pass_through_and_come_back() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("rid@example.com").await;
    let r = s
        .call(
            "GET",
            &format!("{}/v1/profile", s.core()),
            Some(&t),
            None,
            &[
                ("x-request-id", "req-abc-123"),
                (
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ),
            ],
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("x-request-id").and_then(|v| v.to_str().ok()),
        Some("req-abc-123")
    );
    let fresh = s.get("/v1/profile", Some(&t)).await;
    assert!(fresh.headers.get("x-request-id").is_some());
    // Internal headers never reach the client.
    assert!(fresh
        .headers
        .keys()
        .all(|k| !k.as_str().starts_with("x-hub-")));
}

/// Headers of each request a recording upstream received.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<Vec<(String, String)>>>>;

/// A stand-in for a service not built yet: records the headers it receives.
async fn recording_upstream() -> (String, Seen) {
    let seen: Seen = Default::default();
    let sink = seen.clone();
    let url = tests_e2e::stand_in(move |req, _| {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        if let Ok(mut s) = sink.lock() {
            s.push(headers);
        }
        actix_web::HttpResponse::Ok()
            .insert_header(("x-hub-internal", "leak"))
            .json(serde_json::json!({"path": req.path(), "query": req.query_string()}))
    });
    (url, seen)
}

#[tokio::test]
async fn the_gateway_forwards_trace_context_and_a_signed_assertion_and_nothing_spoofed() {
    let (upstream, seen) = recording_upstream().await;
    let agent_key = "gateway-to-agent-test-key-0123";
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: format!(
            "[upstreams]\nagent = \"{upstream}\"\n[assertion.keys]\nagent = \"{agent_key}\"\n"
        ),
        ..Default::default()
    })
    .await;
    let t = s.sign_in("trace@example.com").await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let r = s
        .call(
            "POST",
            &format!("{}/v1/agent?x=1", s.core()),
            Some(&t),
            Some(json!({"message": "hi"})),
            &[
                ("traceparent", traceparent),
                ("tracestate", "vendor=1"),
                ("x-request-id", "rid-42"),
                ("x-forwarded-for", "198.51.100.9"),
                ("x-user-id", "spoof"),
                ("x-hub-assertion", "spoof"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body, json!({"path": "/v1/agent", "query": "x=1"}));
    assert!(
        r.headers.get("x-hub-internal").is_none(),
        "internal response headers are stripped"
    );
    let got = seen.lock().map(|v| v.clone()).expect("the lock");
    assert_eq!(got.len(), 1);
    let h = |name: &str| -> Vec<String> {
        got[0]
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(h("traceparent"), [traceparent]);
    assert_eq!(h("tracestate"), ["vendor=1"]);
    assert_eq!(h("x-request-id"), ["rid-42"]);
    // The bearer stops at the gateway: services act on the assertion.
    assert!(h("authorization").is_empty(), "{:?}", h("authorization"));
    assert!(h("x-forwarded-for").is_empty() && h("x-user-id").is_empty());
    // Exactly one assertion, the gateway's, carrying the caller and the client IP.
    let assertion = h("x-hub-assertion");
    assert_eq!(assertion.len(), 1);
    let decoded: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&assertion[0]).expect("base64url"))
            .expect("json");
    assert_eq!(decoded["identity"]["email"], "trace@example.com");
    assert_eq!(decoded["credential"]["kind"], "session");
    assert_eq!(decoded["ip"], "198.51.100.9");
    assert_eq!(decoded["method"], "POST");
    assert_eq!(decoded["path"], "/v1/agent?x=1");
    assert_eq!(decoded["iss"], "gateway");
    assert_eq!(decoded["aud"], "agent");
    assert_eq!(
        decoded["body_sha256"],
        sha256_hex(json!({"message": "hi"}).to_string().as_bytes())
    );
    assert_eq!(decoded["request_id"], "rid-42");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, agent_key.as_bytes());
    let sig = hex::decode(&h("x-hub-signature")[0]).expect("hex");
    assert!(ring::hmac::verify(&key, assertion[0].as_bytes(), &sig).is_ok());
}

#[tokio::test]
async fn refused_bearers_are_refused_again_without_asking_identity() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // An identity that refuses everything and counts how often it is asked.
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let identity = tests_e2e::stand_in(move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        actix_web::HttpResponse::Unauthorized()
            .insert_header(("x-hub-credential-refused", "1"))
            .json(json!({"error": "invalid or expired credential"}))
    });
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: format!("[upstreams]\nidentity = \"{identity}\"\n"),
        ..Default::default()
    })
    .await;
    for _ in 0..5 {
        let r = s.get("/v1/profile", Some("sess_garbage")).await;
        assert_eq!(
            (r.status, r.error()),
            (401, "invalid or expired credential")
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "identity was asked once for one token"
    );
    assert_eq!(s.get("/v1/auth/me", Some("sess_other")).await.status, 401);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn identity_refusing_the_gateway_itself_signs_nobody_out() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // An identity that refuses the gateway's assertion (a key rotation gone
    // wrong, clock skew): a 401 without the refused-credential mark.
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let identity = tests_e2e::stand_in(move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        actix_web::HttpResponse::Unauthorized()
            .json(json!({"error": "invalid gateway assertion signature"}))
    });
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: format!("[upstreams]\nidentity = \"{identity}\"\n"),
        ..Default::default()
    })
    .await;
    for _ in 0..3 {
        let r = s.get("/v1/profile", Some("sess_valid_elsewhere")).await;
        assert_eq!((r.status, r.error()), (503, "identity service unavailable"));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "nothing was remembered: every request asked identity again"
    );
}

#[tokio::test]
async fn a_captured_assertion_cannot_carry_another_body_or_be_replayed() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (_, org) = s.org_with_owner("replay@example.com").await;
    let me = s.get("/v1/auth/me", Some(&staff)).await.body;
    let identity: hub_domain::Identity = serde_json::from_value(me).expect("identity");
    // What a captured header pair for a 1-unit credit looks like: signed with
    // the gateway's key for org-billing, which only the stack knows.
    let key = s.gateway_key("org_billing");
    let path = format!("/v1/organizations/{org}/wallet/credit");
    let small = br#"{"amount_minor":1}"#;
    let mut a = assertion(
        "gateway",
        "org_billing",
        "POST",
        &path,
        small,
        time::OffsetDateTime::now_utc().unix_timestamp(),
    );
    a.identity = Some(identity);
    a.credential = Some(hub_domain::Credential {
        kind: hub_domain::CredentialKind::Session,
        id: uuid::Uuid::new_v4(),
    });
    let (p, sig) = minter("gateway", "org_billing", &key).sign_assertion(&a);
    let send = |body: &'static [u8], idem: Option<&'static str>| {
        let (p, sig, url) = (
            p.clone(),
            sig.clone(),
            format!("{}{path}", s.service_url("org_billing")),
        );
        let http = s.http.clone();
        async move {
            let mut rb = http
                .post(url)
                .header("x-hub-assertion", p)
                .header("x-hub-signature", sig)
                .header("content-type", "application/json")
                .body(body);
            if let Some(k) = idem {
                rb = rb.header("idempotency-key", k);
            }
            let r = rb.send().await.expect("send");
            (r.status().as_u16(), r.text().await.expect("a body"))
        }
    };
    let big = send(br#"{"amount_minor":100000000}"#, None).await;
    assert_eq!(big.0, 401, "{}", big.1);
    assert!(big.1.contains("does not match"), "{}", big.1);
    let keyed = send(small, Some("another-key")).await;
    assert_eq!(keyed.0, 401, "{}", keyed.1);
    let first = send(small, None).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let again = send(small, None).await;
    assert_eq!(again.0, 401, "{}", again.1);
    assert!(again.1.contains("already used"), "{}", again.1);
    let balance: i64 = sqlx::query_scalar!(
        "SELECT balance_minor FROM org_billing.wallets WHERE org_id = $1::uuid",
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("balance");
    assert_eq!(balance, 1, "only the signed request was applied, once");
}

#[tokio::test]
async fn a_key_is_good_for_one_receiver_and_callers_for_their_routes() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("keys@example.com").await;
    let (_, org) = s.org_with_owner("keys-owner@example.com").await;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let send = |base: String, method: &'static str, path: String, (p, sig): (String, String)| {
        let s = &s;
        let t = t.clone();
        async move {
            s.call(
                method,
                &format!("{base}{path}"),
                Some(&t),
                None,
                &[("x-hub-assertion", &p), ("x-hub-signature", &sig)],
            )
            .await
        }
    };
    // identity's key (what a compromised identity holds) is worthless at org-billing.
    let path = format!("/v1/organizations/{org}");
    let forged = minter("gateway", "org_billing", &s.assertion_key).sign_assertion(&assertion(
        "gateway",
        "org_billing",
        "GET",
        &path,
        b"",
        now,
    ));
    let r = send(s.service_url("org_billing").to_owned(), "GET", path, forged).await;
    assert_eq!(
        (r.status, r.error()),
        (401, "invalid gateway assertion signature")
    );
    // org-billing's caller key at identity works on its one internal route only.
    let billing = minter("org_billing", "identity", &s.billing_to_identity_key);
    let profile = billing.sign_assertion(&assertion(
        "org_billing",
        "identity",
        "GET",
        "/v1/profile",
        b"",
        now,
    ));
    let r = send(
        s.service_url("identity").to_owned(),
        "GET",
        "/v1/profile".into(),
        profile,
    )
    .await;
    assert_eq!(
        (r.status, r.error()),
        (401, "this caller may not call this route")
    );
    // And it cannot pose as the gateway.
    let posing = billing.sign_assertion(&assertion(
        "gateway",
        "identity",
        "GET",
        "/v1/profile",
        b"",
        now,
    ));
    let r = send(
        s.service_url("identity").to_owned(),
        "GET",
        "/v1/profile".into(),
        posing,
    )
    .await;
    assert_eq!(r.status, 401);
    // The gateway's own key is refused on internal routes.
    let path = format!("/internal/v1/organizations/{org}/owner");
    let internal = minter("gateway", "identity", &s.assertion_key)
        .sign_assertion(&assertion("gateway", "identity", "POST", &path, b"", now));
    let r = send(s.service_url("identity").to_owned(), "POST", path, internal).await;
    assert_eq!(
        (r.status, r.error()),
        (401, "this caller may not call this route")
    );
}

#[tokio::test]
async fn concurrent_misses_for_one_bearer_ask_identity_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // A slow identity that accepts every bearer and counts how often it is asked.
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let expires = (time::OffsetDateTime::now_utc().unix_timestamp() + 3600).to_string();
    let identity = tests_e2e::stand_in(move |req, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        let user = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map_or(0, |v| v.len());
        actix_web::HttpResponse::Ok()
            .insert_header(("x-hub-credential-kind", "session"))
            .insert_header(("x-hub-credential-id", uuid::Uuid::new_v4().to_string()))
            .insert_header(("x-hub-credential-expires", expires.clone()))
            .json(
                json!({"user_id": uuid::Uuid::from_u128(user as u128), "email": "u@example.com",
                         "name": "", "staff": false, "memberships": []}),
            )
    });
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: format!("[upstreams]\nidentity = \"{identity}\"\n"),
        ..Default::default()
    })
    .await;
    let answers = join_all((0..16).map(|_| s.get("/v1/auth/me", Some("sess_cold")))).await;
    assert!(answers.iter().all(|r| r.status == 200), "{answers:?}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "16 concurrent misses for one bearer made one resolution"
    );
    // Another bearer is resolved on its own.
    assert_eq!(
        s.get("/v1/auth/me", Some("sess_other_one")).await.status,
        200
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn internal_response_headers_never_reach_clients_on_changes() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("noleak@example.com").await;
    let renamed = s.patch("/v1/auth/me", Some(&t), json!({"name": "N"})).await;
    let org = s.create_org(&t, "Leakless", "TR").await;
    let out = s.post("/v1/auth/logout", Some(&t), json!({})).await;
    for r in [&renamed, &org, &out] {
        assert!(r.status < 300, "{:?}", r.body);
        assert!(
            r.headers.keys().all(|k| !k.as_str().starts_with("x-hub-")),
            "{:?}",
            r.headers
        );
    }
}

/// The gateway is designed to serve without NATS (which only carries cache
/// invalidations; without it the cache is bypassed): it stays ready, and
/// bearers still resolve, while its NATS connection is down.
#[tokio::test]
async fn the_gateway_stays_ready_and_serves_without_nats() {
    let nats_port = reqwest::Url::parse(&tests_e2e::nats_url())
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(4222);
    let relay = tests_e2e::relay::Relay::to_port(nats_port)
        .await
        .expect("relay");
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: format!("[nats]\nurl = \"nats://127.0.0.1:{}\"\n", relay.port()),
        ..Default::default()
    })
    .await;
    let t = s.sign_in("no-nats@example.com").await;
    assert_eq!(s.get("/v1/auth/me", Some(&t)).await.status, 200);
    relay.cut();
    // The positive marker: the gateway itself reports the connection down.
    let down = tests_e2e::eventually(Duration::from_secs(20), || async {
        (tests_e2e::sample(&s.scrape("gateway").await, "hub_nats_connected") == Some(0.0))
            .then_some(())
    })
    .await;
    assert!(down.is_some(), "the gateway never saw NATS go");
    for base in [s.core(), s.product()] {
        let r = s
            .call("GET", &format!("{base}/readyz"), None, None, &[])
            .await;
        assert_eq!(r.status, 200, "{base}: {:?}", r.body);
    }
    let fresh = s.sign_in("no-nats@example.com").await;
    let me = s.get("/v1/auth/me", Some(&fresh)).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert_eq!(me.body["email"], "no-nats@example.com");
    assert_eq!(s.get("/v1/auth/me", Some(&t)).await.status, 200);
}

#[tokio::test]
async fn methods_no_route_forwards_are_405_with_allow_before_any_credential_check() {
    let s = TestStack::spawn().await;
    let allow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
    let long = "X".repeat(3000);
    let cases = [
        // A made-up token of 3,000 bytes on an authenticated route.
        (s.core(), long.as_str(), "/v1/organizations"),
        // Public paths: no credential asked for, still not forwarded.
        (s.core(), "TRACE", "/v1/auth/request-link"),
        (s.core(), "PROPFIND", "/v1/auth/mfa/verify"),
        (s.product(), "TRACE", "/core-api/v1/auth/request-link"),
        (s.product(), "TRACE", "/v1/skus"),
        (s.core(), "TRACE", "/v1/auth/me"),
    ];
    for (base, method, path) in cases {
        let r = tests_e2e::raw_request(base, method, path, &[], b"").await;
        let shown = &method[..method.len().min(16)];
        assert_eq!(r.status, 405, "{shown} {path}: {:?}", r.body);
        assert_eq!(
            r.headers.get("allow").and_then(|v| v.to_str().ok()),
            Some(allow),
            "{shown} {path}"
        );
        assert_eq!(r.body["error"], "method not allowed", "{shown} {path}");
    }
    // The served methods still pass: the public POST, the authenticated GET.
    let r = s
        .request_link_from("allowed@example.com", "198.51.100.7")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = tests_e2e::raw_request(s.core(), "GET", "/v1/organizations", &[], b"").await;
    assert_eq!(r.status, 401, "{:?}", r.body);
}
