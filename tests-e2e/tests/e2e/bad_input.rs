use serde_json::json;
use tests_e2e::TestStack;

async fn raw(
    s: &TestStack,
    method: &str,
    path: &str,
    token: Option<&str>,
    ctype: Option<&str>,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
    let mut rb = s.http.request(m, format!("{}{path}", s.core())).body(body);
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    if let Some(c) = ctype {
        rb = rb.header("content-type", c);
    }
    let r = rb.send().await.expect("send");
    let status = r.status().as_u16();
    let body = r.json().await.unwrap_or(serde_json::Value::Null);
    (status, body)
}

fn is_error(body: &serde_json::Value) -> bool {
    body["error"].as_str().is_some_and(|e| !e.is_empty())
}

#[tokio::test]
async fn malformed_json_is_a_400() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("bad@example.com").await;
    for (path, token) in [
        ("/v1/auth/request-link", None),
        ("/v1/profile", Some(t.as_str())),
    ] {
        let method = if path == "/v1/profile" {
            "PATCH"
        } else {
            "POST"
        };
        let (status, body) = raw(
            &s,
            method,
            path,
            token,
            Some("application/json"),
            b"{\"email\": ".to_vec(),
        )
        .await;
        assert_eq!(status, 400, "{path}");
        assert!(is_error(&body), "{body}");
        let (status, body) = raw(
            &s,
            method,
            path,
            token,
            Some("application/json"),
            b"[1,2]".to_vec(),
        )
        .await;
        assert_eq!(status, 400, "{path}");
        assert!(is_error(&body));
    }
}

#[tokio::test]
async fn a_wrong_content_type_is_a_415() {
    let s = TestStack::spawn().await;
    let (status, body) = raw(
        &s,
        "POST",
        "/v1/auth/request-link",
        None,
        Some("text/plain"),
        b"{\"email\":\"a@b.com\"}".to_vec(),
    )
    .await;
    assert_eq!(status, 415);
    assert!(is_error(&body));
    let (status, _) = raw(
        &s,
        "POST",
        "/v1/auth/verify",
        None,
        None,
        b"{\"token\":\"x\"}".to_vec(),
    )
    .await;
    assert_eq!(status, 415);
}

#[tokio::test]
async fn oversized_bodies_are_a_413() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("big@example.com").await;
    // Over identity's 64 KiB JSON limit, under the gateway's 1 MiB.
    let bio = "x".repeat(100 * 1024);
    let (status, body) = raw(
        &s,
        "PATCH",
        "/v1/profile",
        Some(&t),
        Some("application/json"),
        json!({"bio": bio}).to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 413);
    assert!(is_error(&body));
    // Over the gateway's limit: refused before it is forwarded.
    let huge = vec![b' '; 2 * 1024 * 1024];
    let (status, body) = raw(
        &s,
        "POST",
        "/v1/auth/request-link",
        None,
        Some("application/json"),
        huge,
    )
    .await;
    assert_eq!(status, 413);
    assert!(is_error(&body));
}

#[tokio::test]
async fn a_non_uuid_path_id_is_a_400() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("path@example.com").await;
    let r = s.delete("/v1/auth/sessions/not-a-uuid", Some(&t)).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error(), "invalid path parameter: expected a uuid");
}

#[tokio::test]
async fn unknown_routes_are_a_json_404_and_unknown_methods_a_json_405_with_allow() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("route@example.com").await;
    for (m, p, tok) in [
        ("GET", "/nope", None),
        ("GET", "/v2/auth/me", Some(t.as_str())),
        ("GET", "/v1/auth/nope", Some(t.as_str())),
    ] {
        let r = s.call(m, &format!("{}{p}", s.core()), tok, None, &[]).await;
        assert_eq!(r.status, 404, "{m} {p}: {:?}", r.body);
        assert!(!r.error().is_empty(), "{m} {p}");
        assert!(r.headers.get("allow").is_none(), "{m} {p}");
    }
    // Another method on a path that exists: 405 naming the methods it has,
    // through the gateway (from the owning service) and from the gateway's
    // own probes, on both hosts.
    let product = format!("{}/v1/skus", s.product());
    let core_api = format!("{}/core-api/v1/profile", s.product());
    let healthz = format!("{}/healthz", s.core());
    for (m, url, tok, allow) in [
        (
            "PUT",
            format!("{}/v1/profile", s.core()),
            Some(t.as_str()),
            "GET, PATCH",
        ),
        (
            "GET",
            format!("{}/v1/auth/request-link", s.core()),
            Some(t.as_str()),
            "POST",
        ),
        ("DELETE", core_api, Some(t.as_str()), "GET, PATCH"),
        ("POST", product, Some(t.as_str()), "GET"),
        ("POST", healthz, None, "GET"),
    ] {
        let r = s.call(m, &url, tok, None, &[]).await;
        assert_eq!(r.status, 405, "{m} {url}: {:?}", r.body);
        assert_eq!(r.error(), "method not allowed", "{m} {url}");
        assert_eq!(
            r.headers.get("allow").and_then(|v| v.to_str().ok()),
            Some(allow),
            "{m} {url}"
        );
    }
    // Without a usable bearer a protected path is a 401 first.
    let r = s
        .call("PUT", &format!("{}/v1/profile", s.core()), None, None, &[])
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn missing_and_mistyped_fields_are_a_400() {
    let s = TestStack::spawn().await;
    for body in [json!({}), json!({"email": 5}), json!({"email": null})] {
        let r = s.post("/v1/auth/request-link", None, body.clone()).await;
        assert_eq!(r.status, 400, "{body}");
        assert!(!r.error().is_empty());
    }
    let r = s
        .post("/v1/auth/verify", None, json!({"token": ["x"]}))
        .await;
    assert_eq!(r.status, 400);
}
