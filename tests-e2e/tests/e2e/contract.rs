//! The service-contract surface: every transition and its 409s, concurrent
//! transitions, transfer rules, usage and the data export, maintenance windows.

use crate::servers::{active_server, order, p_call, sid, wait_for};
use futures::future::join_all;
use serde_json::{json, Value};
use tests_e2e::TestStack;

async fn act(
    s: &TestStack,
    token: &str,
    id: &str,
    what: &str,
    body: Option<Value>,
) -> tests_e2e::Resp {
    p_call(
        s,
        "POST",
        &format!("/v1/service-contract/services/{id}/{what}"),
        Some(token),
        body,
    )
    .await
}

async fn usage_of(s: &TestStack, token: &str, org: &str) -> tests_e2e::Resp {
    p_call(
        s,
        "GET",
        &format!("/v1/service-contract/usage?org_id={org}"),
        Some(token),
        None,
    )
    .await
}

#[tokio::test]
async fn every_transition_of_the_contract_and_its_409s() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("contract@example.com").await;
    let r = p_call(
        &s,
        "POST",
        "/v1/service-contract/services",
        Some(&owner),
        Some(json!({"org_id": org, "plan": "vps-small", "name": "svc-1"})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (
            r.body["product"].as_str(),
            r.body["state"].as_str(),
            r.body["plan"].as_str()
        ),
        (Some("server"), Some("provisioning"), Some("vps-small"))
    );
    let id = sid(&r);
    let r = act(&s, &owner, &id, "suspend", None).await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot suspend a server that is provisioning")
    );
    wait_for(&s, &owner, &id, "active").await;
    let r = act(&s, &owner, &id, "activate", None).await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot activate a server that is active")
    );
    assert_eq!(
        act(&s, &owner, &id, "suspend", None).await.body["state"],
        "suspended"
    );
    let r = act(&s, &owner, &id, "suspend", None).await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot suspend a server that is suspended")
    );
    let r = act(
        &s,
        &owner,
        &id,
        "resize",
        Some(json!({"plan": "vps-large"})),
    )
    .await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot resize a server that is suspended")
    );
    assert_eq!(
        act(&s, &owner, &id, "activate", None).await.body["state"],
        "active"
    );
    // Resize: another plan of the same kind; usage splits.
    for (plan, want) in [
        (
            "dedicated-gpu",
            "plan must be fulfilled the same way as the current one",
        ),
        ("vps-small", "the service is already on this plan"),
        ("nothing", "plan is not a SKU of the catalog"),
    ] {
        let r = act(&s, &owner, &id, "resize", Some(json!({"plan": plan}))).await;
        assert_eq!((r.status, r.error()), (400, want));
    }
    let r = act(
        &s,
        &owner,
        &id,
        "resize",
        Some(json!({"plan": "vps-large"})),
    )
    .await;
    assert_eq!(
        (r.status, r.body["plan"].as_str(), r.body["state"].as_str()),
        (200, Some("vps-large"), Some("active"))
    );
    let usage = usage_of(&s, &owner, &org).await;
    let u = &usage.body[0];
    assert_eq!(u["periods"].as_array().map(Vec::len), Some(2), "{u}");
    assert_eq!(
        (
            u["periods"][0]["plan"].as_str(),
            u["periods"][1]["plan"].as_str()
        ),
        (Some("vps-small"), Some("vps-large"))
    );
    assert!(u["periods"][0]["ended_at"].is_string() && u["periods"][1]["ended_at"].is_null());
    // Time passes: totals count it.
    s.clock.advance(time::Duration::hours(2));
    let usage = usage_of(&s, &owner, &org).await;
    assert!(
        usage.body[0]["total_seconds"]
            .as_i64()
            .is_some_and(|t| t >= 7200),
        "{:?}",
        usage.body
    );
    let listed = p_call(
        &s,
        "GET",
        &format!("/v1/service-contract/services?org_id={org}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(listed.body[0]["state"], "active");
    assert_eq!(
        act(&s, &owner, &id, "terminate", None).await.body["state"],
        "terminated"
    );
    for what in ["activate", "suspend", "terminate"] {
        let r = act(&s, &owner, &id, what, None).await;
        assert_eq!(r.status, 409, "{what}");
        assert!(
            r.error().ends_with("a server that is terminated"),
            "{}",
            r.error()
        );
    }
    // Roles: a visitor reads but cannot move anything.
    let visitor = s.member(&owner, &org, "visitor").await;
    assert_eq!(
        p_call(
            &s,
            "GET",
            &format!("/v1/service-contract/services?org_id={org}"),
            Some(&visitor),
            None
        )
        .await
        .status,
        200
    );
    assert_eq!(act(&s, &visitor, &id, "suspend", None).await.status, 403);
}

#[tokio::test]
async fn of_concurrent_transitions_exactly_one_wins() {
    let s = TestStack::spawn().await;
    let (owner, _org, id) = active_server(&s, "race-contract@example.com", "race-1").await;
    let all = join_all((0..6).map(|_| act(&s, &owner, &id, "suspend", None))).await;
    let won = all.iter().filter(|r| r.status == 200).count();
    let lost: Vec<_> = all.iter().filter(|r| r.status == 409).collect();
    assert_eq!((won, lost.len()), (1, 5), "{all:?}");
    assert_eq!(lost[0].error(), "cannot suspend a server that is suspended");
    // Power and contract share the one lifecycle: stop loses against suspend.
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{id}/power"),
        Some(&owner),
        Some(json!({"action": "stop"})),
    )
    .await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot stop a server that is suspended")
    );
}

#[tokio::test]
async fn transfer_needs_the_owner_of_both_and_moves_access_at_once() {
    let s = TestStack::spawn().await;
    let (owner, from, id) = active_server(&s, "transfer@example.com", "mover").await;
    let to = s
        .create_org(&owner, "Receiver", "TR")
        .await
        .text("id")
        .to_owned();
    let (stranger, elsewhere) = s.org_with_owner("transfer-stranger@example.com").await;
    let from_member = s.member(&owner, &from, "manager").await;
    // A manager of the source is not enough; an organization the caller is
    // not in is a 404; the same organization is a 400.
    let r = act(
        &s,
        &from_member,
        &id,
        "transfer",
        Some(json!({"to_org_id": to})),
    )
    .await;
    assert_eq!(r.status, 403);
    assert!(r.error().contains("owner"), "{}", r.error());
    let r = act(
        &s,
        &owner,
        &id,
        "transfer",
        Some(json!({"to_org_id": elsewhere})),
    )
    .await;
    assert_eq!(r.status, 404);
    let r = act(
        &s,
        &stranger,
        &id,
        "transfer",
        Some(json!({"to_org_id": elsewhere})),
    )
    .await;
    assert_eq!(r.status, 404);
    let r = act(
        &s,
        &owner,
        &id,
        "transfer",
        Some(json!({"to_org_id": from})),
    )
    .await;
    assert_eq!(r.status, 400);
    // A hostname taken in the receiver: 409, nothing moves.
    let clash = sid(&order(&s, &owner, &to, "dedicated-gpu", "mover").await);
    let r = act(&s, &owner, &id, "transfer", Some(json!({"to_org_id": to}))).await;
    assert_eq!(
        (r.status, r.error()),
        (
            409,
            "hostname mover is already used by a server of the receiving organization"
        )
    );
    assert_eq!(
        p_call(
            &s,
            "POST",
            &format!("/v1/servers/{clash}/terminate"),
            Some(&owner),
            None
        )
        .await
        .status,
        200
    );
    let r = act(&s, &owner, &id, "transfer", Some(json!({"to_org_id": to}))).await;
    assert_eq!(
        (r.status, r.body["org_id"].as_str(), r.body["id"].as_str()),
        (200, Some(to.as_str()), Some(id.as_str()))
    );
    // The old organization's members lose it at once; the new one has it.
    assert_eq!(
        p_call(
            &s,
            "GET",
            &format!("/v1/servers/{id}"),
            Some(&from_member),
            None
        )
        .await
        .status,
        404
    );
    let old = p_call(
        &s,
        "GET",
        &format!("/v1/servers?org_id={from}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(old.body, json!([]));
    let new = p_call(&s, "GET", &format!("/v1/servers/{id}"), Some(&owner), None).await;
    assert_eq!(
        (new.body["org_id"].as_str(), new.body["status"].as_str()),
        (Some(to.as_str()), Some("active"))
    );
    // Usage splits between the organizations.
    let u_from = usage_of(&s, &owner, &from).await;
    let u_to = usage_of(&s, &owner, &to).await;
    assert!(u_from.body[0]["periods"][0]["ended_at"].is_string());
    let to_periods = u_to
        .body
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["service_id"] == json!(id))
        .cloned()
        .expect("usage at the receiver");
    assert!(to_periods["periods"][0]["ended_at"].is_null());
}

#[tokio::test]
async fn the_export_holds_every_service_its_usage_and_its_events() {
    let s = TestStack::spawn().await;
    let (owner, org, a) = active_server(&s, "export@example.com", "exp-a").await;
    let b = sid(&order(&s, &owner, &org, "dedicated-gpu", "exp-b").await);
    assert_eq!(
        p_call(
            &s,
            "POST",
            &format!("/v1/servers/{a}/terminate"),
            Some(&owner),
            None
        )
        .await
        .status,
        200
    );
    let visitor = s.member(&owner, &org, "visitor").await;
    assert_eq!(
        p_call(
            &s,
            "GET",
            &format!("/v1/service-contract/export?org_id={org}"),
            Some(&visitor),
            None
        )
        .await
        .status,
        403
    );
    let e = p_call(
        &s,
        "GET",
        &format!("/v1/service-contract/export?org_id={org}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    assert_eq!(e.body["org_id"], json!(org));
    let services: Vec<&str> = e.body["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["id"].as_str())
        .collect();
    assert_eq!(services, [a.as_str(), b.as_str()]);
    assert_eq!(e.body["services"][0]["status"], "terminated");
    assert!(e.body["services"][0].get("credentials").is_none());
    assert_eq!(e.body["usage"][0]["service_id"], json!(a));
    let kinds: Vec<(&str, &str)> = e.body["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| Some((x["type"].as_str()?, x["data"]["id"].as_str()?)))
        .collect();
    assert_eq!(
        kinds,
        [
            ("server.created", a.as_str()),
            ("server.active", a.as_str()),
            ("server.created", b.as_str()),
            ("server.terminated", a.as_str())
        ]
    );
    let stored: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM server_product.events WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("events");
    assert_eq!(stored, 4);
}

#[tokio::test]
async fn maintenance_windows_are_public_and_added_by_staff() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let user = s.sign_in("maint-user@example.com").await;
    let now = time::OffsetDateTime::now_utc();
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .expect("RFC 3339")
    };
    let window = json!({"title": "Kernel upgrades", "description": "rolling",
                        "starts_at": fmt(now + time::Duration::days(1)), "ends_at": fmt(now + time::Duration::days(1) + time::Duration::hours(2))});
    assert_eq!(
        p_call(
            &s,
            "POST",
            "/v1/admin/maintenance",
            Some(&user),
            Some(window.clone())
        )
        .await
        .status,
        403
    );
    let r = p_call(
        &s,
        "POST",
        "/v1/admin/maintenance",
        Some(&staff),
        Some(window),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let bad = json!({"title": "Backwards", "starts_at": fmt(now), "ends_at": fmt(now - time::Duration::hours(1))});
    let r = p_call(&s, "POST", "/v1/admin/maintenance", Some(&staff), Some(bad)).await;
    assert_eq!(
        (r.status, r.error()),
        (400, "ends_at must be after starts_at")
    );
    let past = json!({"title": "Done", "starts_at": fmt(now - time::Duration::days(2)), "ends_at": fmt(now - time::Duration::days(1))});
    assert_eq!(
        p_call(
            &s,
            "POST",
            "/v1/admin/maintenance",
            Some(&staff),
            Some(past)
        )
        .await
        .status,
        201
    );
    let list = p_call(&s, "GET", "/v1/service-contract/maintenance", None, None).await;
    assert_eq!(list.status, 200);
    let titles: Vec<&str> = list
        .body
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["title"].as_str())
        .collect();
    assert_eq!(titles, ["Kernel upgrades"], "upcoming only");
}
