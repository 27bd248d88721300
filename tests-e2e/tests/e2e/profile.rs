use serde_json::json;
use tests_e2e::{StackOptions, TestStack};

#[tokio::test]
async fn a_new_profile_has_documented_defaults() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("p@example.com").await;
    let p = s.get("/v1/profile", Some(&t)).await;
    assert_eq!(p.status, 200);
    assert_eq!(
        p.body,
        json!({"email": "p@example.com", "name": "", "phone": "", "job_title": "",
               "timezone": "UTC", "locale": "en", "bio": ""})
    );
}

#[tokio::test]
async fn patching_the_profile_changes_only_the_provided_fields() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("p@example.com").await;
    let r = s
        .patch(
            "/v1/profile",
            Some(&t),
            json!({"timezone": "Europe/Istanbul", "locale": "tr"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["timezone"], "Europe/Istanbul");
    let r = s
        .patch(
            "/v1/profile",
            Some(&t),
            json!({"job_title": "CTO", "phone": "+90 212 555 0000", "bio": "hi\nthere"}),
        )
        .await;
    assert_eq!(r.status, 200);
    let p = s.get("/v1/profile", Some(&t)).await;
    assert_eq!(p.body["timezone"], "Europe/Istanbul");
    assert_eq!(p.body["locale"], "tr");
    assert_eq!(p.body["job_title"], "CTO");
    assert_eq!(p.body["phone"], "+90 212 555 0000");
    assert_eq!(p.body["bio"], "hi\nthere");
    assert_eq!(p.body["name"], "");
}

#[tokio::test]
async fn invalid_profile_values_are_refused_and_nothing_changes() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("p@example.com").await;
    let cases = [
        json!({"timezone": "Mars/Olympus"}),
        json!({"timezone": "Europe/Istanbul", "locale": "de"}),
        json!({"bio": "x".repeat(2001)}),
        json!({"name": "n".repeat(121)}),
        json!({"phone": "call me maybe"}),
        json!({"phone": "1".repeat(33)}),
        json!({"job_title": "j".repeat(121)}),
        json!({"nickname": "unknown field"}),
        json!({"name": 42}),
    ];
    for c in cases {
        let r = s.patch("/v1/profile", Some(&t), c.clone()).await;
        assert_eq!(r.status, 400, "{c}: {:?}", r.body);
        assert!(!r.error().is_empty());
    }
    let p = s.get("/v1/profile", Some(&t)).await;
    assert_eq!(p.body["timezone"], "UTC", "a refused patch changed nothing");
    assert_eq!(p.body["locale"], "en");
    let ok = s
        .patch("/v1/profile", Some(&t), json!({"bio": "b".repeat(2000)}))
        .await;
    assert_eq!(ok.status, 200);
}

#[tokio::test]
async fn the_display_name_is_changed_through_me() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("n@example.com").await;
    let r = s
        .patch("/v1/auth/me", Some(&t), json!({"name": "Ada Lovelace"}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["name"], "Ada Lovelace");
    assert_eq!(
        s.get("/v1/auth/me", Some(&t)).await.body["name"],
        "Ada Lovelace"
    );
    assert_eq!(
        s.get("/v1/profile", Some(&t)).await.body["name"],
        "Ada Lovelace"
    );
    let long = s
        .patch("/v1/auth/me", Some(&t), json!({"name": "x".repeat(121)}))
        .await;
    assert_eq!(long.status, 400);
    let exact = s
        .patch("/v1/auth/me", Some(&t), json!({"name": "ş".repeat(120)}))
        .await;
    assert_eq!(exact.status, 200, "120 characters, more bytes");
    let missing = s.patch("/v1/auth/me", Some(&t), json!({})).await;
    assert_eq!(missing.status, 400);
}

#[tokio::test]
async fn a_name_change_reaches_every_gateway_replica() {
    let s = TestStack::spawn_with(StackOptions {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let t = s.sign_in("renamed@example.com").await;
    let (g0, g1) = (s.gateways[0].core.clone(), s.gateways[1].core.clone());
    let before = s
        .call("GET", &format!("{g1}/v1/auth/me"), Some(&t), None, &[])
        .await;
    assert_eq!(before.body["name"], "");
    let r = s
        .call(
            "PATCH",
            &format!("{g0}/v1/auth/me"),
            Some(&t),
            Some(json!({"name": "New"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    let after = tests_e2e::eventually(std::time::Duration::from_secs(5), || async {
        let r = s
            .call("GET", &format!("{g1}/v1/auth/me"), Some(&t), None, &[])
            .await;
        (r.body["name"] == "New").then_some(())
    })
    .await;
    assert!(after.is_some(), "replica 1 kept the old name");
}
