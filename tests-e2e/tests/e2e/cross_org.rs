//! Cross-organization access with real ids (issue 15): organization B's owner
//! (session) and B's manager API key send every route of the spec that takes
//! one of organization A's real ids (read, update, delete, retry, confirm,
//! close, ...), on both hosts where the route exists, and get 404 with the
//! plain `{"error": "not found"}` (not the gateway's "no such route", so a
//! mistyped row cannot pass); A's resources are unchanged afterwards. Staged
//! actions and conversations belong to a user: another user gets 404.
//!
//! The cases are one table (method, path with A's id, body, what B's session
//! and what B's key get); every row is sent and the failing rows are listed
//! together at the end.

use crate::servers::{order, p_call, sid, wait_for};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, Resp, TestStack};

/// An expected answer: status and the exact `error` text.
type Want = (u16, &'static str);

/// Another organization's (or user's) resource: as if it did not exist.
const NF: Want = (404, "not found");
/// Staff-only routes refuse everyone else before looking at the id, so they
/// reveal nothing either (proto-docs/decisions.md, Authorization).
const STAFF: Want = (403, "staff only");
/// Session-only routes refuse every API key before looking at the id.
const SESSION: Want = (
    401,
    "this endpoint needs a session token; API keys and access tokens are not accepted",
);
/// Member and key management under B's own organization: B's key passes the
/// role check in B and is refused as a key, before A's id is looked at.
const KEY_NO_MANAGE: Want = (
    403,
    "this operation needs a session: API keys cannot manage members or keys",
);
/// Transfer needs the owner role in the source organization (B's own); a key
/// is never an owner, so it is refused before the target (A) is looked at.
const KEY_NOT_OWNER: Want = (403, "insufficient role: requires owner");

/// Where a route exists.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Host {
    /// A core route: the core host and the product host's `/core-api`.
    Core,
    /// A product route: the product host only.
    Product,
}

/// One row: method, path (with A's ids), body, what B's owner gets (by
/// session) and what B's manager API key gets.
struct Case {
    host: Host,
    method: &'static str,
    path: String,
    body: Option<Value>,
    session: Want,
    key: Want,
}

fn case(
    host: Host,
    method: &'static str,
    path: String,
    body: Option<Value>,
    session: Want,
    key: Want,
) -> Case {
    Case {
        host,
        method,
        path,
        body,
        session,
        key,
    }
}

/// Everything organization A (and its users) has that B must not reach.
struct OrgA {
    id: String,
    owner: String,
    key_id: String,
    key_token: String,
    member: String,
    server: String,
    endpoint: String,
    delivery: String,
    submission: String,
    /// A second session of A's owner (the first one re-reads A afterwards).
    other_session_id: String,
    other_session: String,
    /// A's owner's staged create_org and the conversation it is in.
    staged_own: String,
    conversation: String,
    /// A credit to A staged by staff (another user's staged action).
    staged_credit: String,
}

/// B's own things used to name A's ids from inside B.
struct OrgB {
    id: String,
    owner: String,
    owner_email: String,
    key_token: String,
    server: String,
    endpoint: String,
}

fn text(v: &Value, pointer: &str) -> String {
    tests_e2e::Json::text(v, pointer).to_owned()
}

/// Stage `message` as `token`; returns (confirmation id, conversation id).
async fn stage(s: &TestStack, token: &str, message: &str) -> (String, String) {
    let r = s
        .post("/v1/agent", Some(token), json!({ "message": message }))
        .await;
    assert_eq!(
        (r.status, r.body["tier"].as_str()),
        (200, Some("confirmation_required")),
        "{message}: {:?}",
        r.body
    );
    (
        text(&r.body, "/confirmation_id"),
        text(&r.body, "/conversation_id"),
    )
}

async fn setup(s: &TestStack) -> (OrgA, OrgB) {
    let a_owner = s.sign_in("cross-a-owner@example.com").await;
    let b_owner_email = "cross-b-owner@example.com".to_owned();
    let b_owner = s.sign_in(&b_owner_email).await;
    let a = s.create_org(&a_owner, "Cross A Org", "TR").await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let a_id = text(&a.body, "/id");
    let b = s.create_org(&b_owner, "Cross B Org", "TR").await;
    assert_eq!(b.status, 201, "{:?}", b.body);
    let b_id = text(&b.body, "/id");

    // API keys (manager: the most a key can be).
    let k = s.create_key(&a_owner, &a_id, Some("manager")).await;
    assert_eq!(k.status, 201, "{:?}", k.body);
    let (a_key_id, a_key_token) = (text(&k.body, "/key/id"), text(&k.body, "/token"));
    let k = s.create_key(&b_owner, &b_id, Some("manager")).await;
    assert_eq!(k.status, 201, "{:?}", k.body);
    let b_key_token = text(&k.body, "/token");

    // A member of A with AI settings of their own.
    let dev = s.member(&a_owner, &a_id, "developer").await;
    let dev_id = text(&s.get("/v1/auth/me", Some(&dev)).await.body, "/user_id");
    let ai = s
        .patch(
            &format!("/v1/organizations/{a_id}/members/{dev_id}/ai"),
            Some(&a_owner),
            json!({"token_limit": 500}),
        )
        .await;
    assert_eq!(
        (ai.status, ai.body["token_limit"].as_i64()),
        (200, Some(500)),
        "{:?}",
        ai.body
    );

    // Webhook endpoints (a local receiver that accepts everything), then a
    // server each: A's endpoint gets deliveries of A's server events.
    let rx = tests_e2e::stand_in(|_, _| actix_web::HttpResponse::Ok().finish());
    let mut endpoints = Vec::new();
    for (token, org) in [(&a_owner, &a_id), (&b_owner, &b_id)] {
        let r = p_call(
            s,
            "POST",
            "/v1/webhooks",
            Some(token),
            Some(json!({"org_id": org, "url": rx})),
        )
        .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        endpoints.push(sid(&r));
    }
    let mut servers = Vec::new();
    for (token, org, host) in [(&a_owner, &a_id, "cross-a"), (&b_owner, &b_id, "cross-b")] {
        let r = order(s, token, org, "vps-small", host).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        let id = sid(&r);
        wait_for(s, token, &id, "active").await;
        servers.push(id);
    }
    // server.created and server.active, both delivered (a stable log).
    let log = format!("/v1/webhooks/{}/deliveries", endpoints[0]);
    let deliveries = eventually(Duration::from_secs(20), || async {
        let r = p_call(s, "GET", &log, Some(&a_owner), None).await;
        let rows = r.array("");
        (rows.len() >= 2 && rows.iter().all(|d| d["status"] == "delivered")).then_some(rows)
    })
    .await
    .expect("A's endpoint got its server's events");
    let delivery = text(&deliveries[0], "/id");

    // A KYC submission of A.
    let kyc = s
        .post(
            &format!("/v1/organizations/{a_id}/kyc"),
            Some(&a_owner),
            json!({"fields": {"company_name": "Cross A AS", "tax_id": "TX-1"},
                   "address": {"line1": "Main 1", "city": "Ankara", "postal_code": "06000", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert_eq!(kyc.status, 201, "{:?}", kyc.body);

    // A second session of A's owner, by its id.
    let other_session = s.sign_in("cross-a-owner@example.com").await;
    let sessions = s.get("/v1/auth/sessions", Some(&other_session)).await;
    let other_session_id = sessions
        .array("")
        .iter()
        .find(|x| x["current"] == true)
        .map(|x| text(x, "/id"))
        .expect("the current session");
    assert!(!other_session_id.is_empty(), "{:?}", sessions.body);

    // Staged actions: A's owner's own (in a conversation of theirs), and a
    // credit to A staged by staff.
    let (staged_own, conversation) = stage(
        s,
        &a_owner,
        "create an organization named Cross Later Org in TR",
    )
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let (staged_credit, _) = stage(s, &staff, "credit 10 TRY to Cross A Org").await;

    (
        OrgA {
            id: a_id,
            owner: a_owner,
            key_id: a_key_id,
            key_token: a_key_token,
            member: dev_id,
            server: servers[0].clone(),
            endpoint: endpoints[0].clone(),
            delivery,
            submission: text(&kyc.body, "/id"),
            other_session_id,
            other_session,
            staged_own,
            conversation,
            staged_credit,
        },
        OrgB {
            id: b_id,
            owner: b_owner,
            owner_email: b_owner_email,
            key_token: b_key_token,
            server: servers[1].clone(),
            endpoint: endpoints[1].clone(),
        },
    )
}

/// Every route of proto-docs/openapi.yaml that takes one of A's ids (in the
/// path, the query or the body). Reads first, then changes, then the
/// destructive ones, so that a row wrongly answered cannot hide the rows
/// after it in the same pass (the final re-read catches it anyway).
#[rustfmt::skip]
fn table(a: &OrgA, b: &OrgB) -> Vec<Case> {
    use Host::{Core, Product};
    let (org, bo, dev) = (&a.id, &b.id, &a.member);
    let (srv, ep, del) = (&a.server, &a.endpoint, &a.delivery);
    let (sub, conv) = (&a.submission, &a.conversation);
    let kyc = json!({"fields": {"company_name": "Stolen AS", "tax_id": "TX-9"},
        "address": {"line1": "x", "city": "y", "postal_code": "1", "country": "TR"}, "notice_acked": true});
    let ai = json!({"ai_enabled": false, "token_limit": 1});
    let creds = json!({"username": "u", "password": "p", "host": "h"});
    vec![
        // Reads: identity, org-billing, kyc, agent.
        case(Core, "GET", format!("/v1/organizations/{org}"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/wallet"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/wallet/transactions"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/tokens"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/members"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/members/{dev}/ai"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{bo}/members/{dev}/ai"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/api-keys"), None, NF, NF),
        case(Core, "GET", format!("/v1/organizations/{org}/kyc"), None, NF, NF),
        case(Core, "GET", format!("/v1/agent/conversations/{conv}/messages"), None, NF, SESSION),
        // Reads: server-product, webhook-dispatcher.
        case(Product, "GET", format!("/v1/servers?org_id={org}"), None, NF, NF),
        case(Product, "GET", format!("/v1/servers/{srv}"), None, NF, NF),
        case(Product, "GET", format!("/v1/service-contract/services?org_id={org}"), None, NF, NF),
        case(Product, "GET", format!("/v1/service-contract/usage?org_id={org}"), None, NF, NF),
        case(Product, "GET", format!("/v1/service-contract/export?org_id={org}"), None, NF, NF),
        case(Product, "GET", format!("/v1/webhooks?org_id={org}"), None, NF, NF),
        case(Product, "GET", format!("/v1/webhooks/{ep}/deliveries"), None, NF, NF),
        // Changes.
        case(Core, "PATCH", format!("/v1/organizations/{org}/members/{dev}/ai"), Some(ai.clone()), NF, NF),
        case(Core, "PATCH", format!("/v1/organizations/{bo}/members/{dev}/ai"), Some(ai), NF, KEY_NO_MANAGE),
        case(Core, "POST", format!("/v1/organizations/{org}/members"),
            Some(json!({"email": b.owner_email, "role": "owner"})), NF, NF),
        case(Core, "POST", format!("/v1/organizations/{org}/api-keys"),
            Some(json!({"name": "stolen", "role": "manager"})), NF, NF),
        case(Core, "POST", format!("/v1/organizations/{org}/kyc"), Some(kyc), NF, NF),
        case(Core, "POST", format!("/v1/organizations/{org}/wallet/credit"),
            Some(json!({"amount_minor": 100})), STAFF, STAFF),
        case(Core, "POST", format!("/v1/organizations/{org}/tokens/grant"),
            Some(json!({"amount": 100})), STAFF, STAFF),
        case(Core, "POST", format!("/v1/admin/kyc/{sub}/approve"), Some(json!({})), STAFF, STAFF),
        case(Core, "POST", format!("/v1/admin/kyc/{sub}/reject"), Some(json!({})), STAFF, STAFF),
        case(Core, "POST", format!("/v1/admin/kyc/{sub}/request-info"),
            Some(json!({"requested_fields": ["fields.tax_id"]})), STAFF, STAFF),
        case(Core, "POST", "/v1/agent".into(),
            Some(json!({"message": "show my profile", "org_id": org})), NF, SESSION),
        case(Core, "POST", "/v1/agent".into(),
            Some(json!({"message": "show my profile", "conversation_id": conv})), NF, SESSION),
        case(Core, "POST", "/v1/agent/confirm".into(),
            Some(json!({"confirmation_id": a.staged_own})), NF, SESSION),
        case(Core, "POST", "/v1/agent/confirm".into(),
            Some(json!({"confirmation_id": a.staged_credit})), NF, SESSION),
        case(Core, "POST", "/v1/agent/reject".into(),
            Some(json!({"confirmation_id": a.staged_own})), NF, SESSION),
        case(Core, "POST", "/v1/agent/reject".into(),
            Some(json!({"confirmation_id": a.staged_credit})), NF, SESSION),
        case(Product, "POST", "/v1/servers".into(),
            Some(json!({"org_id": org, "sku_id": "vps-small", "hostname": "cross-b2"})), NF, NF),
        case(Product, "POST", "/v1/service-contract/services".into(),
            Some(json!({"org_id": org, "plan": "vps-small", "name": "cross-b3"})), NF, NF),
        case(Product, "POST", format!("/v1/servers/{srv}/power"), Some(json!({"action": "reboot"})), NF, NF),
        case(Product, "POST", format!("/v1/service-contract/services/{srv}/suspend"), None, NF, NF),
        case(Product, "POST", format!("/v1/service-contract/services/{srv}/activate"), None, NF, NF),
        case(Product, "POST", format!("/v1/service-contract/services/{srv}/resize"),
            Some(json!({"plan": "vps-large"})), NF, NF),
        case(Product, "POST", format!("/v1/service-contract/services/{srv}/transfer"),
            Some(json!({"to_org_id": bo})), NF, NF),
        case(Product, "POST", format!("/v1/service-contract/services/{}/transfer", b.server),
            Some(json!({"to_org_id": org})), NF, KEY_NOT_OWNER),
        case(Product, "POST", format!("/v1/admin/fulfilment/{srv}/complete"), Some(creds), STAFF, STAFF),
        case(Product, "POST", "/v1/webhooks".into(),
            Some(json!({"org_id": org, "url": "http://127.0.0.1:9/stolen"})), NF, NF),
        case(Product, "POST", format!("/v1/webhooks/{ep}/rotate-secret"), None, NF, NF),
        case(Product, "POST", format!("/v1/webhooks/{ep}/deliveries/{del}/retry"), None, NF, NF),
        case(Product, "POST", format!("/v1/webhooks/{}/deliveries/{del}/retry", b.endpoint), None, NF, NF),
        // Destructive changes.
        case(Core, "POST", format!("/v1/agent/conversations/{conv}/close"), None, NF, SESSION),
        case(Core, "DELETE", format!("/v1/auth/sessions/{}", a.other_session_id), None, NF, SESSION),
        case(Core, "DELETE", format!("/v1/organizations/{org}/api-keys/{}", a.key_id), None, NF, NF),
        case(Core, "DELETE", format!("/v1/organizations/{bo}/api-keys/{}", a.key_id), None, NF, KEY_NO_MANAGE),
        case(Core, "DELETE", format!("/v1/organizations/{org}/members/{dev}"), None, NF, NF),
        case(Core, "DELETE", format!("/v1/organizations/{bo}/members/{dev}"), None, NF, KEY_NO_MANAGE),
        case(Product, "POST", format!("/v1/servers/{srv}/terminate"), None, NF, NF),
        case(Product, "POST", format!("/v1/service-contract/services/{srv}/terminate"), None, NF, NF),
        case(Product, "DELETE", format!("/v1/webhooks/{ep}"), None, NF, NF),
    ]
}

/// Drop the fields that move with the clock alone.
fn without(mut v: Value, keys: &[&str]) -> Value {
    match &mut v {
        Value::Object(m) => {
            for k in keys {
                m.remove(*k);
            }
            for x in m.values_mut() {
                *x = without(x.take(), keys);
            }
        }
        Value::Array(l) => {
            for x in l.iter_mut() {
                *x = without(x.take(), keys);
            }
        }
        _ => {}
    }
    v
}

/// Everything of A (and B's server) as A's owner (and B's owner) read it:
/// (what, status and body).
async fn snapshot(s: &TestStack, a: &OrgA, b: &OrgB) -> Vec<(String, Value)> {
    let org = &a.id;
    let core_reads = [
        format!("/v1/organizations/{org}"),
        format!("/v1/organizations/{org}/wallet"),
        format!("/v1/organizations/{org}/wallet/transactions"),
        format!("/v1/organizations/{org}/tokens"),
        format!("/v1/organizations/{org}/members"),
        format!("/v1/organizations/{org}/members/{}/ai", a.member),
        format!("/v1/organizations/{org}/api-keys"),
        format!("/v1/organizations/{org}/kyc"),
        "/v1/auth/sessions".to_owned(),
        "/v1/agent/conversations".to_owned(),
        format!("/v1/agent/conversations/{}/messages", a.conversation),
    ];
    let product_reads = [
        format!("/v1/servers?org_id={org}"),
        format!("/v1/servers/{}", a.server),
        format!("/v1/service-contract/services?org_id={org}"),
        format!("/v1/service-contract/usage?org_id={org}"),
        format!("/v1/service-contract/export?org_id={org}"),
        format!("/v1/webhooks?org_id={org}"),
        format!("/v1/webhooks/{}/deliveries", a.endpoint),
    ];
    let moving = ["seconds", "total_seconds", "exported_at"];
    let mut out = Vec::new();
    for path in core_reads {
        let r = s.get(&path, Some(&a.owner)).await;
        out.push((path, json!([r.status, r.body])));
    }
    for path in product_reads {
        let r = p_call(s, "GET", &path, Some(&a.owner), None).await;
        out.push((path, json!([r.status, without(r.body, &moving)])));
    }
    // The credentials still work.
    let r = s
        .get(&format!("/v1/organizations/{org}"), Some(&a.key_token))
        .await;
    out.push(("A's API key".into(), json!(r.status)));
    let r = s.get("/v1/profile", Some(&a.other_session)).await;
    out.push(("A's owner's other session".into(), json!(r.status)));
    // Stored state the routes do not show: the endpoint's sealed secret, the
    // staged actions' status.
    let endpoint: Option<String> = sqlx::query_scalar!(
        r#"SELECT row_to_json(e)::text AS "v!" FROM webhook_dispatcher.endpoints e WHERE id = $1::uuid"#,
        uuid::Uuid::parse_str(&a.endpoint).expect("a uuid"),
    )
    .fetch_optional(&s.db)
    .await
    .expect("endpoint row");
    out.push(("A's endpoint row".into(), json!(endpoint)));
    for id in [&a.staged_own, &a.staged_credit] {
        let status: Option<String> = sqlx::query_scalar!(
            "SELECT status FROM agent.staged_actions WHERE id = $1::uuid",
            uuid::Uuid::parse_str(id).expect("a uuid"),
        )
        .fetch_optional(&s.db)
        .await
        .expect("staged action");
        out.push((format!("staged action {id}"), json!(status)));
    }
    // B's own server stays B's (the transfer of it to A is refused).
    let r = p_call(
        s,
        "GET",
        &format!("/v1/servers/{}", b.server),
        Some(&b.owner),
        None,
    )
    .await;
    out.push((
        "B's server".into(),
        json!([r.status, r.body["org_id"], r.body["status"]]),
    ));
    out
}

async fn send(s: &TestStack, base: &str, c: &Case, token: &str) -> Resp {
    s.call(
        c.method,
        &format!("{base}{}", c.path),
        Some(token),
        c.body.clone(),
        &[],
    )
    .await
}

#[tokio::test]
async fn another_organizations_real_ids_are_not_found_on_every_route_and_host() {
    let s = TestStack::spawn().await;
    let (a, b) = setup(&s).await;
    // Every id in the table is well formed and taken from a real answer (an
    // empty or made-up id would let its rows pass for the wrong reason); the
    // snapshot then reads each of A's as A's owner.
    for id in [
        &a.id,
        &a.key_id,
        &a.member,
        &a.server,
        &a.endpoint,
        &a.delivery,
        &a.submission,
        &a.other_session_id,
        &a.staged_own,
        &a.conversation,
        &a.staged_credit,
        &b.id,
        &b.server,
        &b.endpoint,
    ] {
        assert!(uuid::Uuid::parse_str(id).is_ok(), "not an id: {id:?}");
    }
    let before = snapshot(&s, &a, &b).await;
    for (what, v) in &before {
        let ok = match v {
            Value::Array(x) => x.first() == Some(&json!(200)),
            Value::Number(n) => n.as_u64() == Some(200),
            Value::String(_) => true,
            _ => false,
        };
        assert!(ok, "A's owner reads {what}: {v}");
    }

    let cases = table(&a, &b);
    let core_api = format!("{}/core-api", s.product());
    let mut failures = Vec::new();
    let mut sent = 0;
    for (caller, token, by_key) in [
        ("B's owner", &b.owner, false),
        ("B's API key", &b.key_token, true),
    ] {
        for c in &cases {
            let bases = match c.host {
                Host::Core => vec![s.core(), core_api.as_str()],
                Host::Product => vec![s.product()],
            };
            let want = if by_key { c.key } else { c.session };
            for base in bases {
                let r = send(&s, base, c, token).await;
                sent += 1;
                if (r.status, &r.body) != (want.0, &json!({ "error": want.1 })) {
                    failures.push(format!(
                        "{caller} {} {base}{}: got {} {}, want {} {:?}",
                        c.method, c.path, r.status, r.body, want.0, want.1
                    ));
                }
            }
        }
    }

    let after = snapshot(&s, &a, &b).await;
    for ((what, was), (_, now)) in before.iter().zip(&after) {
        if was != now {
            failures.push(format!("A changed: {what}: was {was}, now {now}"));
        }
    }
    // Positive proof that both staged actions were still open: their owners
    // can still decide them.
    let r = s
        .post(
            "/v1/agent/reject",
            Some(&a.owner),
            json!({"confirmation_id": a.staged_own}),
        )
        .await;
    if r.status != 200 {
        failures.push(format!("A's owner rejects their staged action: {r:?}"));
    }
    let staff = s.sign_in("staff@example.com").await;
    let r = s
        .post(
            "/v1/agent/confirm",
            Some(&staff),
            json!({"confirmation_id": a.staged_credit}),
        )
        .await;
    if r.status != 200 {
        failures.push(format!("staff confirms their staged credit: {r:?}"));
    }
    eprintln!(
        "{} rows, {sent} requests, {} failures",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {sent} cross-organization requests (or re-reads) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
