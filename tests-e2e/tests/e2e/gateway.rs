use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use serde_json::json;
use tests_e2e::{StackOptions, TestStack};

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
    let s = TestStack::spawn().await;
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
    let direct = |path: &str| format!("{}{path}", s.identity);
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

    // Signed with another key, or replayed on another path: refused too.
    let assertion = |path: &str, iat: i64| {
        json!({"identity": null, "credential": null, "ip": "127.0.0.1", "request_id": "r",
               "method": "GET", "path": path, "iat": iat})
    };
    let sign = |key: &str, a: &serde_json::Value| {
        let payload = URL_SAFE_NO_PAD.encode(a.to_string());
        let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
        let sig = hex::encode(ring::hmac::sign(&k, payload.as_bytes()).as_ref());
        (payload, sig)
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let (p, sig) = sign(
        "a-key-that-is-not-the-internal-one",
        &assertion("/v1/auth/me", now),
    );
    let r = s
        .call(
            "GET",
            &direct("/v1/auth/me"),
            Some(&t),
            None,
            &[("x-hub-assertion", &p), ("x-hub-signature", &sig)],
        )
        .await;
    assert_eq!(
        (r.status, r.error()),
        (401, "invalid gateway assertion signature")
    );
    let (p, sig) = sign(&s.assertion_key, &assertion("/v1/profile", now));
    let r = s
        .call(
            "GET",
            &direct("/v1/auth/me"),
            Some(&t),
            None,
            &[("x-hub-assertion", &p), ("x-hub-signature", &sig)],
        )
        .await;
    assert_eq!(
        (r.status, r.error()),
        (401, "gateway assertion does not match this request")
    );
    let (p, sig) = sign(&s.assertion_key, &assertion("/v1/auth/me", now - 3600));
    let r = s
        .call(
            "GET",
            &direct("/v1/auth/me"),
            Some(&t),
            None,
            &[("x-hub-assertion", &p), ("x-hub-signature", &sig)],
        )
        .await;
    assert_eq!((r.status, r.error()), (401, "gateway assertion expired"));
    // The right key, path and time: accepted (this is what the gateway does).
    let (p, sig) = sign(&s.assertion_key, &assertion("/v1/auth/me", now));
    let r = s
        .call(
            "GET",
            &direct("/v1/auth/me"),
            Some(&t),
            None,
            &[("x-hub-assertion", &p), ("x-hub-signature", &sig)],
        )
        .await;
    assert_eq!(r.status, 200);
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
