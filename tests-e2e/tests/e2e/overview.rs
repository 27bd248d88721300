//! The staff overview (issue 35): one request through the gateway shows what
//! waits for a person in every service, with counts and the oldest item's
//! age, every service's readiness and dead letters; staff only; served from
//! one gathering for `overview.cache_secs`; a service that cannot answer is
//! shown as such while the others are still shown.

use crate::servers::order;
use serde_json::{json, Value};
use tests_e2e::{StackOptions, TestStack};

const STAFF: &str = "staff@example.com";
const SERVICES: [&str; 6] = [
    "agent",
    "identity",
    "kyc",
    "org_billing",
    "server_product",
    "webhook_dispatcher",
];

fn queue<'a>(o: &'a Value, name: &str) -> &'a Value {
    let q = &o["queues"][name];
    assert!(q.is_object(), "no queue {name} in {o}");
    q
}

#[tokio::test]
async fn staff_see_what_waits_in_every_service_in_one_cached_answer() {
    // A long period: the test sees the cache hold without racing its end.
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml: "[overview]\ncache_secs = 3600\n".into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in(STAFF).await;
    let (owner, org) = s.org_with_owner("overview-owner@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let key = s.create_key(&owner, &org, Some("manager")).await;
    let key = key.text("token").to_owned();

    // Staff only, and only GET.
    assert_eq!(s.get("/v1/admin/overview", None).await.status, 401);
    for (who, token) in [("owner", &owner), ("API key", &key)] {
        let r = s.get("/v1/admin/overview", Some(token)).await;
        assert_eq!((r.status, r.error()), (403, "staff only"), "{who}");
    }
    let r = s.post("/v1/admin/overview", Some(&staff), json!({})).await;
    assert_eq!(r.status, 405, "{:?}", r.body);

    // One item waiting in each queue a person works.
    let kyc = json!({"fields": {"company_name": "Overview AS", "tax_id": "TX-1", "registration_number": "RN-1"},
                     "address": {"line1": "Kizilay Cd. 1", "city": "Ankara", "postal_code": "06420", "country": "TR"},
                     "notice_acked": true});
    let r = s
        .post(&format!("/v1/organizations/{org}/kyc"), Some(&owner), kyc)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = order(&s, &owner, &org, "dedicated-gpu", "gpu-1").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.text("status"), "pending_fulfilment");
    let proposal =
        json!({"title": "Dark mode", "problem": "Too bright.", "proposal": "Add a dark theme."});
    let r = s
        .post("/v1/proposals", Some(&owner), proposal.clone())
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let claim = json!({"amount_minor": 5_000, "currency": "TRY", "reference": "EFT 2026-11-28 #1"});
    let r = s
        .post(
            &format!("/v1/organizations/{org}/payment-claims"),
            Some(&finance),
            claim,
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let (_, other) = s.org_with_owner("overview-suspended@example.com").await;
    let r = s
        .post(
            &format!("/v1/admin/organizations/{other}/suspend"),
            Some(&staff),
            json!({"reason": "unpaid invoices"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    let o = s.get("/v1/admin/overview", Some(&staff)).await;
    assert_eq!(o.status, 200, "{:?}", o.body);
    let o = o.body;
    for (name, count) in [
        ("kyc_submissions_pending", 1),
        ("fulfilment_queue", 1),
        ("proposals_draft", 1),
        ("payment_claims_pending", 1),
        ("organizations_suspended", 1),
        ("billing_runs_running", 0),
        ("webhook_endpoints_failing", 0),
    ] {
        let q = queue(&o, name);
        assert_eq!(q["count"], count, "{name}: {o}");
        if count > 0 {
            assert!(
                q["oldest_age_secs"].as_i64().is_some_and(|a| a >= 0),
                "{name}: {o}"
            );
        } else {
            assert!(q["oldest_age_secs"].is_null(), "{name}: {o}");
        }
    }
    // The manual server is within its 48-hour SLA.
    assert_eq!(queue(&o, "fulfilment_queue")["past_due"], 0);
    for name in SERVICES {
        let st = &o["services"][name];
        assert_eq!(st["ready"], true, "{name}: {o}");
        assert!(st.get("error").is_none(), "{name}: {o}");
        assert_eq!(st["dead_letters"], json!({}), "{name}: {o}");
    }
    assert_eq!(o["dead_letters_total"], 0);
    assert_eq!(o["cache_secs"], 3600);

    // Served from the one gathering: a second proposal is not counted, and
    // the product host's /core-api path is the same answer.
    let r = s.post("/v1/proposals", Some(&owner), proposal).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let again = s.get("/v1/admin/overview", Some(&staff)).await;
    assert_eq!(again.body, o);
    let product = s
        .call(
            "GET",
            &format!("{}/core-api/v1/admin/overview", s.product()),
            Some(&staff),
            None,
            &[],
        )
        .await;
    assert_eq!(product.status, 200, "{:?}", product.body);
    assert_eq!(product.body["generated_at"], o["generated_at"]);
}

#[tokio::test]
async fn a_service_that_cannot_answer_is_shown_down_and_the_others_still_are() {
    // Every request gathers afresh; the webhook dispatcher's address is a
    // port nothing listens on.
    let s = TestStack::spawn_with(StackOptions {
        gateway_toml:
            "[overview]\ncache_secs = 0\n[upstreams]\nwebhook_dispatcher = \"http://127.0.0.1:9\"\n"
                .into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in(STAFF).await;
    let (owner, _) = s.org_with_owner("overview-down@example.com").await;
    let proposal = json!({"title": "Faster", "problem": "Slow.", "proposal": "Cache it."});
    let first = s.get("/v1/admin/overview", Some(&staff)).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let down = &first.body["services"]["webhook_dispatcher"];
    assert_eq!(down["ready"], false, "{}", first.body);
    assert_eq!(down["error"], "unreachable", "{}", first.body);
    assert!(down["dead_letters"].is_null());
    assert!(first.body["queues"]
        .get("webhook_endpoints_failing")
        .is_none());
    assert!(first.body["dead_letters_total"].is_null());
    assert_eq!(first.body["services"]["agent"]["ready"], true);
    assert_eq!(queue(&first.body, "proposals_draft")["count"], 0);

    // Without a cache period, what changed is seen on the next request.
    let r = s.post("/v1/proposals", Some(&owner), proposal).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let next = s.get("/v1/admin/overview", Some(&staff)).await;
    assert_eq!(queue(&next.body, "proposals_draft")["count"], 1);
}
