//! Server access credentials (security review 3, issue 32): only the roles
//! that work on servers see them, every read is in the organization's audit
//! without the secret, managers rotate them at the provider, and a transfer
//! rotates them.

use crate::servers::{active_server, order, p_call, sid, wait_for};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, TestStack};

async fn detail(s: &TestStack, token: &str, id: &str) -> tests_e2e::Resp {
    p_call(s, "GET", &format!("/v1/servers/{id}"), Some(token), None).await
}

async fn rotate(s: &TestStack, token: &str, id: &str) -> tests_e2e::Resp {
    p_call(
        s,
        "POST",
        &format!("/v1/servers/{id}/credentials/rotate"),
        Some(token),
        None,
    )
    .await
}

fn password(v: &Value) -> String {
    v.text("/credentials/password").to_owned()
}

async fn key(s: &TestStack, owner: &str, org: &str, role: &str) -> String {
    let r = s.create_key(owner, org, Some(role)).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.text("token").to_owned()
}

/// The caller's audit entry of `action` about server `id`, once identity has
/// stored it.
async fn audited(s: &TestStack, token: &str, action: &str, id: &str) -> Value {
    eventually(Duration::from_secs(10), || async {
        let a = s.get("/v1/audit/me", Some(token)).await;
        a.body.as_array().into_iter().flatten().find_map(|e| {
            (e["action"] == action
                && (e["detail"]["server_id"] == id || e["detail"]["service_id"] == id))
                .then(|| e.clone())
        })
    })
    .await
    .unwrap_or_else(|| panic!("no {action} audit entry about {id}"))
}

#[tokio::test]
async fn only_owner_manager_and_developer_see_credentials() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "creds-roles@example.com", "cr-1").await;
    let mut allowed = vec![("owner session", owner.clone())];
    let mut withheld = Vec::new();
    for role in ["manager", "developer"] {
        allowed.push((role, s.member(&owner, &org, role).await));
        allowed.push((role, key(&s, &owner, &org, role).await));
    }
    for role in ["finance", "visitor"] {
        withheld.push((role, s.member(&owner, &org, role).await));
        withheld.push((role, key(&s, &owner, &org, role).await));
    }
    for (who, token) in &allowed {
        let d = detail(&s, token, &id).await;
        assert_eq!(d.status, 200, "{who}");
        assert_eq!(d.body["credentials"]["username"], "root", "{who}");
        assert!(password(&d.body).len() >= 32, "{who}");
        assert!(d.body.get("credentials_withheld").is_none(), "{who}");
    }
    for (who, token) in &withheld {
        let d = detail(&s, token, &id).await;
        assert_eq!(
            (d.status, d.body["status"].as_str()),
            (200, Some("active")),
            "{who}"
        );
        assert!(d.body["credentials"].is_null(), "{who}: {:?}", d.body);
        assert_eq!(
            d.body["credentials_withheld"],
            "insufficient role: requires owner or manager or developer",
            "{who}"
        );
        assert!(!d.body.to_string().contains("password"), "{who}");
    }
}

#[tokio::test]
async fn a_credentials_read_is_in_the_org_audit_without_the_password() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "creds-audit@example.com", "ca-1").await;
    let developer = s.member(&owner, &org, "developer").await;
    let d = detail(&s, &developer, &id).await;
    let secret = password(&d.body);
    assert!(secret.len() >= 32, "{:?}", d.body);
    let e = audited(&s, &developer, "server.credentials_read", &id).await;
    assert_eq!(e["subject"], format!("org:{org}"));
    assert_eq!(e["detail"]["credential"], "session", "{e}");
    assert!(e["detail"]["credential_id"].is_string(), "{e}");
    assert!(e["created_at"].is_string() && e["actor_user_id"].is_string());
    assert!(!e.to_string().contains(&secret), "{e}");
    // A withheld read records no read: after the visitor's, the owner's
    // read (the marker) is stored, and only the developer's and the owner's
    // are there.
    let visitor = s.member(&owner, &org, "visitor").await;
    assert!(detail(&s, &visitor, &id).await.body["credentials"].is_null());
    assert!(password(&detail(&s, &owner, &id).await.body).len() >= 32);
    audited(&s, &owner, "server.credentials_read", &id).await;
    let reads: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM identity.audit_log
            WHERE action = 'server.credentials_read' AND detail->>'server_id' = $1"#,
        id,
    )
    .fetch_one(&s.db)
    .await
    .expect("audit rows");
    assert_eq!(reads, 2);
}

#[tokio::test]
async fn managers_rotate_credentials_at_the_provider_and_it_is_audited() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "creds-rotate@example.com", "rot-1").await;
    let old = password(&detail(&s, &owner, &id).await.body);
    assert!(old.len() >= 32);
    // Developer and visitor (sessions and keys): 403 naming the role.
    for role in ["developer", "visitor", "finance"] {
        for token in [
            s.member(&owner, &org, role).await,
            key(&s, &owner, &org, role).await,
        ] {
            let r = rotate(&s, &token, &id).await;
            assert_eq!(r.status, 403, "{role}: {:?}", r.body);
            assert!(r.error().contains("manager"), "{role}: {}", r.error());
        }
    }
    // Another organization's owner: 404, as for a server that does not exist.
    let (stranger, _) = s.org_with_owner("creds-rotate-stranger@example.com").await;
    let r = rotate(&s, &stranger, &id).await;
    assert_eq!((r.status, r.error()), (404, "not found"));
    assert_eq!(
        rotate(&s, &owner, &uuid::Uuid::new_v4().to_string())
            .await
            .status,
        404
    );
    // Still the old password after the refusals.
    assert_eq!(password(&detail(&s, &owner, &id).await.body), old);
    // A manager rotates: the answer carries the new password, the detail
    // shows it from now on.
    let manager = s.member(&owner, &org, "manager").await;
    let r = rotate(&s, &manager, &id).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let new = password(&r.body);
    assert!(new.len() >= 32, "{:?}", r.body);
    assert_ne!(new, old);
    assert_eq!(r.body["credentials"]["username"], "root");
    assert_eq!(r.body["status"], "active");
    assert_eq!(password(&detail(&s, &owner, &id).await.body), new);
    // A manager's key too.
    let mkey = key(&s, &owner, &org, "manager").await;
    let r = rotate(&s, &mkey, &id).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_ne!(password(&r.body), new);
    // Audited, without either password.
    let e = audited(&s, &manager, "server.credentials_rotated", &id).await;
    assert_eq!(e["subject"], format!("org:{org}"));
    assert!(
        !e.to_string().contains(&new) && !e.to_string().contains(&old),
        "{e}"
    );
    // Nothing to rotate yet (provisioning), or staff's (manual): 409.
    let fresh = sid(&order(&s, &owner, &org, "vps-small", "rot-2").await);
    let r = rotate(&s, &owner, &fresh).await;
    assert_eq!(
        (r.status, r.error()),
        (
            409,
            "cannot rotate the credentials of a server that is provisioning"
        )
    );
    let manual = sid(&order(&s, &owner, &org, "dedicated-gpu", "rot-3").await);
    let staff = s.sign_in("staff@example.com").await;
    let done = p_call(
        &s,
        "POST",
        &format!("/v1/admin/fulfilment/{manual}/complete"),
        Some(&staff),
        Some(json!({"username": "admin", "password": "by-hand-0123", "host": "10.0.0.9"})),
    )
    .await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    let r = rotate(&s, &owner, &manual).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("staff"), "{}", r.error());
    assert_eq!(
        password(&detail(&s, &owner, &manual).await.body),
        "by-hand-0123"
    );
    wait_for(&s, &owner, &fresh, "active").await;
}

#[tokio::test]
async fn a_transfer_rotates_the_credentials_at_the_provider() {
    let s = TestStack::spawn().await;
    let (owner, _from, id) = active_server(&s, "creds-transfer@example.com", "tr-1").await;
    let old = password(&detail(&s, &owner, &id).await.body);
    assert!(old.len() >= 32);
    let to = s
        .create_org(&owner, "Receiver", "TR")
        .await
        .text("id")
        .to_owned();
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/service-contract/services/{id}/transfer"),
        Some(&owner),
        Some(json!({"to_org_id": to})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let d = detail(&s, &owner, &id).await;
    assert_eq!(d.body["org_id"], json!(to));
    let new = password(&d.body);
    assert!(new.len() >= 32, "{:?}", d.body);
    assert_ne!(new, old, "the giving organization's password still works");
    let e = audited(&s, &owner, "service.transfer", &id).await;
    assert_eq!(e["detail"]["credentials_rotated"], true, "{e}");
    assert!(!e.to_string().contains(&new) && !e.to_string().contains(&old));
}
