//! Order limits (security review 3, issue 32): the per-organization server
//! cap, under concurrent orders and transfers, and the order rate limit.

use crate::servers::{list_of, order, p_call, sid};
use futures::future::join_all;
use serde_json::json;
use tests_e2e::{StackOptions, TestStack};

const AT_CAP: &str = "the organization has 3 servers, its limit: terminate one first";

#[tokio::test]
async fn the_server_cap_holds_under_concurrent_orders_and_transfers() {
    let s = TestStack::spawn_with(StackOptions {
        server_product_toml: "[orders]\nmax_servers_per_org = 3\nrate_per_minute = 0\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("cap@example.com").await;
    for h in ["cap-1", "cap-2"] {
        assert_eq!(order(&s, &owner, &org, "vps-small", h).await.status, 201);
    }
    // Six at once with room for one: exactly one is stored.
    let all = join_all((0..6).map(|i| {
        let (s, owner, org) = (&s, owner.clone(), org.clone());
        async move { order(s, &owner, &org, "vps-small", &format!("race-{i}")).await }
    }))
    .await;
    let created: Vec<_> = all.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "{:?}",
        all.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for r in all.iter().filter(|r| r.status != 201) {
        assert_eq!((r.status, r.error()), (409, AT_CAP));
    }
    let r = order(&s, &owner, &org, "dedicated-gpu", "cap-4").await;
    assert_eq!((r.status, r.error()), (409, AT_CAP));
    let list = list_of(&s, &owner, &org).await;
    assert_eq!(
        list.body.as_array().map(Vec::len),
        Some(3),
        "{:?}",
        list.body
    );
    // Terminating one frees its place.
    let first = list.text("/2/id").to_owned();
    let t = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{first}/terminate"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(t.status, 200, "{:?}", t.body);
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "cap-5").await.status,
        201
    );
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "cap-6").await.status,
        409
    );
    // Another organization has its own cap; a transfer into a full one is
    // refused and moves nothing.
    let other = s
        .create_org(&owner, "Other", "TR")
        .await
        .text("id")
        .to_owned();
    let mover = sid(&order(&s, &owner, &other, "dedicated-gpu", "mover").await);
    assert!(!mover.is_empty());
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/service-contract/services/{mover}/transfer"),
        Some(&owner),
        Some(json!({"to_org_id": org})),
    )
    .await;
    assert_eq!((r.status, r.error()), (409, AT_CAP));
    let d = p_call(
        &s,
        "GET",
        &format!("/v1/servers/{mover}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(d.body["org_id"], json!(other));
}

#[tokio::test]
async fn orders_are_rate_limited_per_organization() {
    let s = TestStack::spawn_with(StackOptions {
        server_product_toml: "[orders]\nrate_per_minute = 60\nburst = 3\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("rate@example.com").await;
    for i in 0..3 {
        let r = order(&s, &owner, &org, "vps-small", &format!("rl-{i}")).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    let r = order(&s, &owner, &org, "vps-small", "rl-3").await;
    assert_eq!(
        (r.status, r.error()),
        (
            429,
            "too many orders for this organization: try again in 1 s"
        )
    );
    // The service contract's provision is the same order.
    let r = p_call(
        &s,
        "POST",
        "/v1/service-contract/services",
        Some(&owner),
        Some(json!({"org_id": org, "plan": "vps-small", "name": "rl-4"})),
    )
    .await;
    assert_eq!(r.status, 429, "{:?}", r.body);
    // Another organization is not affected; a second later there is room.
    let (other_owner, other) = s.org_with_owner("rate-other@example.com").await;
    assert_eq!(
        order(&s, &other_owner, &other, "vps-small", "rl-0")
            .await
            .status,
        201
    );
    s.clock.advance(time::Duration::seconds(2));
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "rl-5").await.status,
        201
    );
}

/// `orders.require_kyc_for_paid`: a paid SKU waits for a verified
/// organization (asked of kyc at each order, so an approval counts at once);
/// a free SKU does not; the service contract's provision is held the same.
#[tokio::test]
async fn paid_skus_need_a_verified_organization_when_the_deployment_requires_it() {
    let s = TestStack::spawn_with(StackOptions {
        server_product_toml: "[orders]\nrequire_kyc_for_paid = true\nrate_per_minute = 0\n".into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let free = p_call(
        &s,
        "POST",
        "/v1/admin/skus",
        Some(&staff),
        Some(
            json!({"id": "free-vps", "name": "Free VPS", "fulfilment": "api", "badges": [],
                    "monthly_price_minor": 0, "currency": "TRY", "position": 9}),
        ),
    )
    .await;
    assert_eq!(free.status, 201, "{:?}", free.body);
    let (owner, org) = s.org_with_owner("kyc-gate@example.com").await;
    let unverified = "this SKU needs a verified organization (KYC status: unverified)";
    let r = order(&s, &owner, &org, "vps-small", "paid-1").await;
    assert_eq!((r.status, r.error()), (422, unverified));
    let r = p_call(
        &s,
        "POST",
        "/v1/service-contract/services",
        Some(&owner),
        Some(json!({"org_id": org, "plan": "vps-small", "name": "svc-1"})),
    )
    .await;
    assert_eq!((r.status, r.error()), (422, unverified));
    assert_eq!(
        order(&s, &owner, &org, "free-vps", "free-1").await.status,
        201
    );
    // Pending review is not verified.
    let sub = s
        .post(
            &format!("/v1/organizations/{org}/kyc"),
            Some(&owner),
            json!({"fields": {"company_name": "Acme AS", "tax_id": "TX-1", "registration_number": "RN-1"},
                   "address": {"line1": "Kizilay Cd. 1", "city": "Ankara", "postal_code": "06420", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert_eq!(sub.status, 201, "{:?}", sub.body);
    let r = order(&s, &owner, &org, "vps-small", "paid-2").await;
    assert_eq!(
        (r.status, r.error()),
        (
            422,
            "this SKU needs a verified organization (KYC status: pending)"
        )
    );
    // Approved: the next order goes through, no wait for an event.
    let sub_id = sub.body["id"].as_str().expect("submission id");
    let a = s
        .post(
            &format!("/v1/admin/kyc/{sub_id}/approve"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let r = order(&s, &owner, &org, "vps-small", "paid-3").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let list = list_of(&s, &owner, &org).await;
    let hosts: Vec<&str> = list
        .body
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v["hostname"].as_str().expect("hostname"))
        .collect();
    assert_eq!(hosts, ["paid-3", "free-1"]);
}
