use serde_json::json;
use tests_e2e::Json;
use tests_e2e::{StackOptions, TestStack};

#[tokio::test]
async fn sessions_list_marks_the_current_one_and_shows_the_client_ip() {
    let s = TestStack::spawn().await;
    let a = s.sign_in("multi@example.com").await;
    let b = s.sign_in("multi@example.com").await;
    let list = s.get("/v1/auth/sessions", Some(&a)).await;
    assert_eq!(list.status, 200);
    let rows = list.array("");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows.iter().filter(|r| r["current"] == true).count(), 1);
    for r in &rows {
        assert!(r.text("ip").starts_with("203.0."), "{r}");
        assert!(r["created_at"].is_string() && r["expires_at"].is_string());
    }
    let from_b = s.get("/v1/auth/sessions", Some(&b)).await;
    let current_a = rows
        .iter()
        .find(|r| r["current"] == true)
        .map(|r| r["id"].clone());
    let current_b = from_b.body.as_array().and_then(|v| {
        v.iter()
            .find(|r| r["current"] == true)
            .map(|r| r["id"].clone())
    });
    assert_ne!(current_a, current_b);
}

#[tokio::test]
async fn a_user_can_revoke_another_of_their_sessions() {
    let s = TestStack::spawn().await;
    let a = s.sign_in("dev@example.com").await;
    let b = s.sign_in("dev@example.com").await;
    assert_eq!(s.get("/v1/auth/me", Some(&b)).await.status, 200);
    let list = s.get("/v1/auth/sessions", Some(&a)).await;
    let other = list
        .array("")
        .iter()
        .find(|r| r["current"] == false)
        .map(|r| r.text("id").to_owned())
        .expect("a session that is not the current one");
    let del = s
        .delete(&format!("/v1/auth/sessions/{other}"), Some(&a))
        .await;
    assert_eq!(del.status, 200, "{:?}", del.body);
    assert_eq!(
        s.get("/v1/auth/me", Some(&b)).await.status,
        401,
        "revoked at once"
    );
    assert_eq!(s.get("/v1/auth/me", Some(&a)).await.status, 200);
    let again = s
        .delete(&format!("/v1/auth/sessions/{other}"), Some(&a))
        .await;
    assert_eq!(again.status, 404, "already revoked");
    let remaining = s.get("/v1/auth/sessions", Some(&a)).await;
    assert_eq!(remaining.body.as_array().map(|v| v.len()), Some(1));
}

#[tokio::test]
async fn another_users_session_is_not_found() {
    let s = TestStack::spawn().await;
    let mine = s.sign_in("me@example.com").await;
    let theirs = s.sign_in("them@example.com").await;
    let their_id = s
        .get("/v1/auth/sessions", Some(&theirs))
        .await
        .text("/0/id")
        .to_owned();
    let r = s
        .delete(&format!("/v1/auth/sessions/{their_id}"), Some(&mine))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body, json!({"error": "not found"}));
    let unknown = s
        .delete(
            &format!("/v1/auth/sessions/{}", uuid::Uuid::new_v4()),
            Some(&mine),
        )
        .await;
    assert_eq!(unknown.body, r.body, "unknown and foreign look the same");
    assert_eq!(s.get("/v1/auth/me", Some(&theirs)).await.status, 200);
}

#[tokio::test]
async fn logout_ends_the_current_session_only() {
    let s = TestStack::spawn().await;
    let a = s.sign_in("bye@example.com").await;
    let b = s.sign_in("bye@example.com").await;
    assert_eq!(s.get("/v1/auth/me", Some(&a)).await.status, 200);
    let out = s.post("/v1/auth/logout", Some(&a), json!({})).await;
    assert_eq!(out.status, 200);
    assert_eq!(s.get("/v1/auth/me", Some(&a)).await.status, 401);
    assert_eq!(
        s.post("/v1/auth/logout", Some(&a), json!({})).await.status,
        401
    );
    assert_eq!(s.get("/v1/auth/me", Some(&b)).await.status, 200);
}

#[tokio::test]
async fn revocation_takes_effect_at_once_on_every_gateway_replica() {
    let s = TestStack::spawn_with(StackOptions {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let (g0, g1) = (s.gateways[0].core.clone(), s.gateways[1].core.clone());
    let a = s.sign_in("replicas@example.com").await;
    let b = s.sign_in("replicas@example.com").await;
    // Warm both replicas' caches for both sessions.
    for g in [&g0, &g1] {
        for t in [&a, &b] {
            let r = s
                .call("GET", &format!("{g}/v1/auth/me"), Some(t), None, &[])
                .await;
            assert_eq!(r.status, 200);
        }
    }
    // Logout through replica 0; replica 1 refuses the token right away.
    let out = s
        .call("POST", &format!("{g0}/v1/auth/logout"), Some(&a), None, &[])
        .await;
    assert_eq!(out.status, 200);
    let r = s
        .call("GET", &format!("{g1}/v1/auth/me"), Some(&a), None, &[])
        .await;
    assert_eq!(r.status, 401, "replica 1 still served a logged-out session");

    // Revoke session b through replica 1 (with a new session c); replica 0 refuses b.
    let c = s.sign_in("replicas@example.com").await;
    let list = s
        .call(
            "GET",
            &format!("{g1}/v1/auth/sessions"),
            Some(&c),
            None,
            &[],
        )
        .await;
    let b_id = list
        .array("")
        .iter()
        .find(|r| r["current"] == false)
        .map(|r| r.text("id").to_owned())
        .expect("a session that is not the current one");
    let del = s
        .call(
            "DELETE",
            &format!("{g1}/v1/auth/sessions/{b_id}"),
            Some(&c),
            None,
            &[],
        )
        .await;
    assert_eq!(del.status, 200);
    let r = s
        .call("GET", &format!("{g0}/v1/auth/me"), Some(&b), None, &[])
        .await;
    assert_eq!(r.status, 401, "replica 0 still served a revoked session");
}

#[tokio::test]
async fn sessions_endpoints_need_a_session() {
    let s = TestStack::spawn().await;
    for (m, p) in [
        ("GET", "/v1/auth/sessions"),
        ("POST", "/v1/auth/logout"),
        (
            "DELETE",
            "/v1/auth/sessions/00000000-0000-0000-0000-000000000000",
        ),
    ] {
        let r = s
            .call(m, &format!("{}{p}", s.core()), None, None, &[])
            .await;
        assert_eq!(r.status, 401, "{m} {p}");
        assert!(!r.error().is_empty());
    }
}
