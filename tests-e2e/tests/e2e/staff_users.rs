//! Staff and users (issue 35): find a user, see their memberships and
//! sessions, disable them (their sessions and the API keys they created stop
//! resolving at once, and no sign-in opens a new one), enable them, end their
//! sessions; staff only, every change audited.

use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, random_ip, TestStack};

const STAFF: &str = "staff@example.com";

fn ids(r: &Value) -> Vec<String> {
    r.as_array()
        .expect("a list")
        .iter()
        .map(|u| u["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[tokio::test]
async fn staff_find_disable_enable_and_sign_out_a_user() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in(STAFF).await;
    let (alice, org) = s.org_with_owner("staffusers-alice@example.com").await;
    let alice_again = s.sign_in("staffusers-alice@example.com").await;
    let key = s.create_key(&alice, &org, Some("manager")).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    let key = key.text("token").to_owned();
    let bob = s.sign_in("staffusers-bob@example.com").await;
    let alice_id = s
        .get("/v1/auth/me", Some(&alice))
        .await
        .text("user_id")
        .to_owned();
    let bob_id = s
        .get("/v1/auth/me", Some(&bob))
        .await
        .text("user_id")
        .to_owned();
    let staff_id = s
        .get("/v1/auth/me", Some(&staff))
        .await
        .text("user_id")
        .to_owned();
    let user = |p: &str| format!("/v1/admin/users/{alice_id}{p}");

    // Staff only.
    for token in [Some(&bob), Some(&key), None] {
        let want = if token.is_some() { 403 } else { 401 };
        let t = token.map(String::as_str);
        assert_eq!(s.get("/v1/admin/users", t).await.status, want);
        assert_eq!(s.get(&user(""), t).await.status, want);
        for p in ["/disable", "/enable", "/sessions/revoke"] {
            let r = s.post(&user(p), t, json!({"reason": "x"})).await;
            assert_eq!(r.status, want, "{p}: {:?}", r.body);
        }
    }
    assert_eq!(
        s.get("/v1/admin/users", Some(&bob)).await.error(),
        "staff only"
    );

    // Search: by the start of the email (any case), by id, newest first,
    // paged by cursor.
    let r = s.get("/v1/admin/users?q=StaffUsers-", Some(&staff)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(ids(&r.body), [bob_id.as_str(), alice_id.as_str()]);
    let r = s
        .get(&format!("/v1/admin/users?q={alice_id}"), Some(&staff))
        .await;
    assert_eq!(ids(&r.body), [alice_id.as_str()]);
    assert_eq!(r.body[0]["status"], "active");
    assert_eq!(r.body[0]["mfa_enabled"], false);
    assert!(r.body[0]["last_sign_in_at"].is_string());
    let first = s
        .get("/v1/admin/users?q=staffusers-&limit=1", Some(&staff))
        .await;
    assert_eq!(ids(&first.body), [bob_id.as_str()]);
    let cursor = first
        .headers
        .get("x-next-cursor")
        .and_then(|v| v.to_str().ok())
        .expect("a next page")
        .to_owned();
    // The next page's link keeps the filters.
    let link = first
        .headers
        .get("link")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert_eq!(
        link,
        format!("</v1/admin/users?q=staffusers-&limit=1&cursor={cursor}>; rel=\"next\"")
    );
    let second = s
        .get(
            &format!("/v1/admin/users?q=staffusers-&limit=1&cursor={cursor}"),
            Some(&staff),
        )
        .await;
    assert_eq!(ids(&second.body), [alice_id.as_str()]);
    assert!(second.headers.get("x-next-cursor").is_none());
    // A wildcard is a character, not a pattern.
    let r = s.get("/v1/admin/users?q=%25", Some(&staff)).await;
    assert_eq!(ids(&r.body), Vec::<String>::new());
    assert_eq!(
        s.get("/v1/admin/users?status=gone", Some(&staff))
            .await
            .status,
        400
    );

    // One user: memberships, live sessions, second factor.
    let d = s.get(&user(""), Some(&staff)).await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    assert_eq!(d.body["email"], "staffusers-alice@example.com");
    assert_eq!(d.body["memberships"][0]["org_id"], org.as_str());
    assert_eq!(d.body["memberships"][0]["role"], "owner");
    assert_eq!(d.body["sessions"].as_array().map(Vec::len), Some(2));
    assert_eq!(d.body["passkeys"], 0);
    assert!(d.body["disabled_reason"].is_null());
    let unknown = format!("/v1/admin/users/{}", uuid::Uuid::new_v4());
    assert_eq!(s.get(&unknown, Some(&staff)).await.status, 404);

    // Each credential resolves (and is cached in the gateway) before.
    for t in [&alice, &alice_again, &key] {
        let r = s.get(&format!("/v1/organizations/{org}"), Some(t)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }

    // Disable: a reason is required; staff cannot disable themselves.
    assert_eq!(
        s.post(&user("/disable"), Some(&staff), json!({"reason": " "}))
            .await
            .status,
        400
    );
    let me = format!("/v1/admin/users/{staff_id}/disable");
    assert_eq!(
        s.post(&me, Some(&staff), json!({"reason": "x"}))
            .await
            .status,
        409
    );
    let r = s
        .post(
            &user("/disable"),
            Some(&staff),
            json!({"reason": "chargeback fraud"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (
            r.body["sessions_revoked"].as_i64(),
            r.body["api_keys_revoked"].as_i64()
        ),
        (Some(2), Some(1))
    );
    // At once: neither session nor the key she created resolves.
    for (what, t) in [
        ("session", &alice),
        ("second session", &alice_again),
        ("API key", &key),
    ] {
        let r = s.get(&format!("/v1/organizations/{org}"), Some(t)).await;
        assert_eq!(r.status, 401, "{what}: {:?}", r.body);
    }
    // No sign-in opens a session: no link is issued, and the answer is the
    // usual one.
    let link = s
        .request_link_from("staffusers-alice@example.com", &random_ip())
        .await;
    assert_eq!((link.status, link.text("status")), (200, "sent"));
    assert!(link.body.get("dev_token").is_none(), "{:?}", link.body);
    assert_eq!(
        s.post(&user("/disable"), Some(&staff), json!({"reason": "again"}))
            .await
            .status,
        409
    );
    let d = s.get(&user(""), Some(&staff)).await;
    assert_eq!(
        (
            d.body["status"].as_str(),
            d.body["disabled_reason"].as_str()
        ),
        (Some("disabled"), Some("chargeback fraud"))
    );
    assert_eq!(d.body["sessions"], json!([]));
    let r = s
        .get(
            "/v1/admin/users?q=staffusers-&status=disabled",
            Some(&staff),
        )
        .await;
    assert_eq!(ids(&r.body), [alice_id.as_str()]);

    // Enable: she signs in again (what was revoked stays revoked).
    assert_eq!(
        s.post(&user("/enable"), Some(&staff), json!({}))
            .await
            .status,
        200
    );
    assert_eq!(
        s.post(&user("/enable"), Some(&staff), json!({}))
            .await
            .status,
        409
    );
    assert_eq!(s.get("/v1/auth/me", Some(&alice)).await.status, 401);
    let back = s.sign_in("staffusers-alice@example.com").await;
    assert_eq!(s.get("/v1/auth/me", Some(&back)).await.status, 200);

    // End every session of a user.
    let r = s
        .post(&user("/sessions/revoke"), Some(&staff), json!({}))
        .await;
    assert_eq!(
        (r.status, r.body["sessions_revoked"].as_i64()),
        (200, Some(1))
    );
    assert_eq!(s.get("/v1/auth/me", Some(&back)).await.status, 401);
    let unknown = format!("/v1/admin/users/{}/sessions/revoke", uuid::Uuid::new_v4());
    assert_eq!(s.post(&unknown, Some(&staff), json!({})).await.status, 404);

    // Every change is in the staff member's history, without the reason.
    let audited = eventually(Duration::from_secs(10), || async {
        let a = s.get("/v1/audit/me", Some(&staff)).await;
        let entries = a.body.as_array().cloned().unwrap_or_default();
        let of = |action: &str| entries.iter().find(|e| e["action"] == action).cloned();
        Some((
            of("user.disabled")?,
            of("user.enabled")?,
            of("user.sessions_revoked")?,
        ))
    })
    .await;
    let (disabled, _, _) = audited.expect("the three actions audited");
    assert_eq!(disabled["subject"], format!("user:{alice_id}"));
    assert!(!disabled.to_string().contains("chargeback"), "{disabled}");
}
