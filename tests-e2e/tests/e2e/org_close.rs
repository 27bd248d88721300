//! Closing an organization (issue 35): only its owner, with a session; refused
//! while a server runs, money is owed or held; then final: every write of its
//! members is refused in every service, its API keys stop resolving, staff
//! can neither suspend nor reactivate it, and its records stay readable.

use crate::servers::{active_server, p_call, wait_for};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, TestStack};

#[tokio::test]
async fn the_owner_closes_an_organization_once_nothing_runs_is_owed_or_held() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org, server) = active_server(&s, "closer@example.com", "close-me").await;
    let manager = s.member(&owner, &org, "manager").await;
    let outsider = s.sign_in("not-a-closer@example.com").await;
    let key = s.create_key(&owner, &org, Some("manager")).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    let key = key.text("token").to_owned();
    let path = format!("/v1/organizations/{org}/close");

    // Who may: the owner, with a session.
    let r = s.post(&path, Some(&manager), json!({})).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "insufficient role: requires owner")
    );
    assert_eq!(s.post(&path, Some(&key), json!({})).await.status, 401);
    assert_eq!(s.post(&path, Some(&outsider), json!({})).await.status, 404);
    assert_eq!(s.post(&path, None, json!({})).await.status, 401);

    // A live server.
    let r = s.post(&path, Some(&owner), json!({})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("1 live server"), "{:?}", r.body);
    let t = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{server}/terminate"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    wait_for(&s, &owner, &server, "terminated").await;

    // Its usage becomes a charge: owed until invoiced and paid (here waived).
    let charges = format!("/v1/organizations/{org}/charges");
    let charge: Value = eventually(Duration::from_secs(20), || {
        let (s, owner, charges) = (&s, &owner, &charges);
        async move {
            let c = s.get(charges, Some(owner)).await;
            c.body.as_array().and_then(|a| a.first().cloned())
        }
    })
    .await
    .expect("the usage charge");
    let r = s.post(&path, Some(&owner), json!({})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(
        r.error().contains("1 charge(s) not yet invoiced"),
        "{:?}",
        r.body
    );
    let id = charge["id"].as_str().expect("a charge id");
    let w = s
        .post(
            &format!("/v1/admin/charges/{id}/waive"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(w.status, 200, "{:?}", w.body);

    // Money held: the wallet is refunded (by staff) first.
    assert_eq!(s.credit(&staff, &org, 2_500).await.status, 200);
    let r = s.post(&path, Some(&owner), json!({})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("wallet balance of 2500"), "{:?}", r.body);
    assert_eq!(s.credit(&staff, &org, -2_500).await.status, 200);

    // Closed.
    let r = s.post(&path, Some(&owner), json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "closed");
    // Its memberships say so (identity learns the status from the event, and
    // a close answered before identity applied it meets "already closed",
    // 409: it flaked in CI), its keys resolve no more, its writes are refused
    // in every service, its records stay readable.
    let closed = eventually(Duration::from_secs(10), || async {
        let me = s.get("/v1/auth/me", Some(&owner)).await;
        let m = me
            .array("memberships")
            .into_iter()
            .find(|m| m["org_id"] == org.as_str())
            .expect("still a member");
        (m["status"] == "closed").then_some(())
    })
    .await;
    assert!(closed.is_some(), "the membership says closed");
    assert_eq!(s.post(&path, Some(&owner), json!({})).await.status, 403);
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}"), Some(&key))
            .await
            .status,
        401
    );
    let r = s
        .patch(
            &format!("/v1/organizations/{org}"),
            Some(&owner),
            json!({"name": "Reopened"}),
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(r.error().contains("organization closed"), "{:?}", r.body);
    let r = s
        .add_member(&owner, &org, "late-joiner@example.com", "visitor")
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    let r = p_call(
        &s,
        "POST",
        "/v1/servers",
        Some(&owner),
        Some(json!({"org_id": org, "sku_id": "vps-small", "hostname": "after-close"})),
    )
    .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    let d = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert_eq!((d.status, d.body["status"].clone()), (200, json!("closed")));
    assert_eq!(s.get(&charges, Some(&owner)).await.status, 200);
    // Final: staff neither suspend nor reactivate it.
    for (p, body) in [
        ("suspend", json!({"reason": "late"})),
        ("reactivate", json!({})),
    ] {
        let r = s
            .post(
                &format!("/v1/admin/organizations/{org}/{p}"),
                Some(&staff),
                body,
            )
            .await;
        assert_eq!(r.status, 409, "{p}: {:?}", r.body);
    }
    // Audited in the organization's history (org-billing's event reaches
    // identity's store through NATS).
    let history = format!("/v1/organizations/{org}/audit");
    let audited = eventually(Duration::from_secs(20), || async {
        let audit = s.get(&history, Some(&owner)).await;
        audit
            .body
            .as_array()?
            .iter()
            .any(|e| e["action"] == "org.closed")
            .then_some(())
    })
    .await;
    assert!(audited.is_some(), "org.closed never in the history");
    // A closed organization needs no owner: its only owner may delete their
    // account.
    let d = s.delete("/v1/auth/me", Some(&owner)).await;
    assert_eq!(d.status, 200, "{:?}", d.body);
}
