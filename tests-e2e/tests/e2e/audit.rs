use event_contracts::AuditRecorded;
use serde_json::json;
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, TestStack};

fn actions(body: &serde_json::Value) -> Vec<String> {
    body.array("")
        .iter()
        .map(|e| e.text("action").to_owned())
        .collect()
}

#[tokio::test]
async fn the_audit_history_records_the_callers_own_actions() {
    let s = TestStack::spawn().await;
    let a = s.sign_in("audited@example.com").await;
    let b = s.sign_in("audited@example.com").await;
    let other = s.sign_in("someone-else@example.com").await;
    let r = s
        .patch(
            "/v1/auth/me",
            Some(&a),
            json!({"name": "Nilufer Audited-Name"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    s.patch(
        "/v1/profile",
        Some(&a),
        json!({"bio": "secret-ish bio", "locale": "tr"}),
    )
    .await;
    let b_id = s
        .get("/v1/auth/sessions", Some(&b))
        .await
        .array("")
        .iter()
        .find(|r| r["current"] == true)
        .map(|r| r.text("id").to_owned())
        .expect("the current session");
    assert_eq!(
        s.delete(&format!("/v1/auth/sessions/{b_id}"), Some(&a))
            .await
            .status,
        200
    );

    let log = s.get("/v1/audit/me", Some(&a)).await;
    assert_eq!(log.status, 200);
    assert_eq!(
        actions(&log.body),
        [
            "auth.session_revoked",
            "profile.updated",
            "user.name_changed",
            "auth.sign_in",
            "auth.sign_in"
        ]
    );
    let entries = log.array("");
    let me = s.get("/v1/auth/me", Some(&a)).await.body["user_id"].clone();
    for e in &entries {
        assert_eq!(e["actor_user_id"], me);
        // sign_in() comes from a forwarded 203.0.x.y address; the other calls from loopback.
        let ip = e.text("ip");
        let want = if e["action"] == "auth.sign_in" {
            "203.0."
        } else {
            "127.0.0.1"
        };
        assert!(ip.starts_with(want), "{e}");
        assert!(e["id"].is_i64() && e["created_at"].is_string() && e["detail"].is_object());
    }
    assert_eq!(entries[1]["detail"], json!({"fields": ["locale", "bio"]}));
    // A name change names the field, as the profile route does, never the name.
    assert_eq!(entries[2]["detail"], json!({"fields": ["name"]}));
    for e in &entries {
        let detail = e["detail"].to_string();
        assert!(
            !detail.contains("Nilufer") && !detail.contains("Audited-Name"),
            "the name is in the audit detail: {e}"
        );
    }
    assert!(
        !log.body.to_string().contains("secret-ish"),
        "values stay out of the audit detail"
    );
    assert_eq!(entries[0]["subject"], format!("session:{b_id}"));

    // Logout is audited too; someone else's history holds only their sign-in.
    s.post("/v1/auth/logout", Some(&b), json!({})).await;
    let c = s.sign_in("audited@example.com").await;
    s.post("/v1/auth/logout", Some(&c), json!({})).await;
    let d = s.sign_in("audited@example.com").await;
    let log = s.get("/v1/audit/me", Some(&d)).await;
    assert_eq!(
        actions(&log.body)[..3],
        ["auth.sign_in", "auth.logout", "auth.sign_in"]
    );
    assert_eq!(
        actions(&s.get("/v1/audit/me", Some(&other)).await.body),
        ["auth.sign_in"]
    );
}

#[tokio::test]
async fn audit_events_from_other_services_are_stored_once() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("events@example.com").await;
    let user_id = s.get("/v1/auth/me", Some(&t)).await.body["user_id"]
        .as_str()
        .and_then(|u| uuid::Uuid::parse_str(u).ok())
        .expect("user id");
    let event = AuditRecorded {
        actor_user_id: Some(user_id.into()),
        action: "org.created".into(),
        subject: "org:123".into(),
        detail: json!({"name": "Acme"}),
        ip: "198.51.100.7".into(),
    };
    let env = event_contracts::Envelope::new(event.clone());
    // The same envelope twice (a redelivery), plus one for somebody else.
    for _ in 0..2 {
        let js = async_nats::jetstream::new(s.nats.clone());
        js.publish(
            s.naming.subject("core.v1.audit.recorded"),
            serde_json::to_vec(&env).expect("JSON").into(),
        )
        .await
        .expect("publish")
        .await
        .expect("ack");
    }
    s.publish(AuditRecorded {
        actor_user_id: Some(uuid::Uuid::new_v4().into()),
        ..event
    })
    .await;

    let seen = eventually(Duration::from_secs(10), || async {
        let log = s.get("/v1/audit/me", Some(&t)).await;
        actions(&log.body)
            .contains(&"org.created".to_owned())
            .then_some(log.body)
    })
    .await
    .expect("the audit event arrived");
    let rows = seen.array("");
    let org = rows
        .iter()
        .find(|e| e["action"] == "org.created")
        .cloned()
        .expect("the org.created row");
    assert_eq!(org["ip"], "198.51.100.7");
    assert_eq!(org["detail"], json!({"name": "Acme"}));
    // Once identity's consumer has handled all three (nothing left to deliver
    // or to acknowledge), count.
    s.consumer_caught_up("CORE", "identity-audit").await;
    let count: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM identity.audit_log WHERE action = 'org.created'"#,
    )
    .fetch_one(&s.db)
    .await
    .unwrap_or(-1);
    assert_eq!(count, 2, "one per distinct event, the redelivery dropped");
}
