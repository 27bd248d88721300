//! The assistant through the gateway: every tier and phrasing with the rule
//! engine, staged actions (confirm, reject, expiry, ownership, 409s, 20
//! concurrent confirms), the permission re-check at confirmation,
//! conversations and memory (limits, curation on demand and by schedule with
//! two replicas), and the model-backed engine against a local
//! OpenAI-compatible server (tool call, staged tool call, timeout, error,
//! token spending and both limits).

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, Resp, StackOptions, TestStack};

async fn ask(s: &TestStack, token: &str, body: Value) -> Resp {
    s.post("/v1/agent", Some(token), body).await
}

async fn say(s: &TestStack, token: &str, message: &str) -> Resp {
    let r = ask(s, token, json!({ "message": message })).await;
    assert_eq!(r.status, 200, "{message}: {:?}", r.body);
    r
}

fn reply(r: &Resp) -> &str {
    r.text("reply")
}

async fn confirm(s: &TestStack, token: &str, id: &str) -> Resp {
    s.post(
        "/v1/agent/confirm",
        Some(token),
        json!({ "confirmation_id": id }),
    )
    .await
}

async fn reject(s: &TestStack, token: &str, id: &str) -> Resp {
    s.post(
        "/v1/agent/reject",
        Some(token),
        json!({ "confirmation_id": id }),
    )
    .await
}

/// Ask for a sensitive action: it must be staged, not run.
async fn stage(s: &TestStack, token: &str, message: &str) -> (String, String) {
    let r = say(s, token, message).await;
    assert_eq!(r.body["tier"], "confirmation_required", "{:?}", r.body);
    let id = r.text("confirmation_id").to_owned();
    assert!(!id.is_empty(), "{:?}", r.body);
    let summary = r.text("action_summary").to_owned();
    (id, summary)
}

async fn named_org(s: &TestStack, token: &str, name: &str, country: &str) -> String {
    let r = s.create_org(token, name, country).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.text("id").to_owned()
}

async fn wallet_minor(s: &TestStack, staff: &str, org: &str) -> i64 {
    let w = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(staff))
        .await;
    assert_eq!(w.status, 200, "{:?}", w.body);
    w.body["balance_minor"].as_i64().unwrap_or(-1)
}

async fn tokens(s: &TestStack, token: &str, org: &str) -> i64 {
    let t = s
        .get(&format!("/v1/organizations/{org}/tokens"), Some(token))
        .await;
    t.body["balance"].as_i64().unwrap_or(-1)
}

#[tokio::test]
async fn every_read_phrasing_is_answered_at_once_by_the_rules() {
    let s = TestStack::spawn().await;
    let owner = s.sign_in("reader@example.com").await;
    let org = named_org(&s, &owner, "Acme Reader GmbH", "DE").await;
    let staff = s.sign_in("staff@example.com").await;
    let credit = s.credit(&staff, &org, 150000).await;
    assert_eq!(credit.status, 200);
    let grant = s.grant(&staff, &org, 2500).await;
    assert_eq!(grant.status, 200);

    let cases: Vec<(String, &str)> = vec![
        (
            format!("What is my wallet balance for org {org}?"),
            "The wallet of Acme Reader GmbH holds 1,500.00 EUR.",
        ),
        (
            "How many AI tokens does Acme Reader GmbH have?".into(),
            "Acme Reader GmbH has 2,500 AI tokens.",
        ),
        (
            "show my organizations".into(),
            "Acme Reader GmbH (owner, DE",
        ),
        (
            "What is the KYC status of Acme Reader GmbH?".into(),
            "The KYC status of Acme Reader GmbH is unverified (tier 0).",
        ),
        ("list my sessions".into(), "You have 1 active session:"),
        ("show my profile".into(), "- email: reader@example.com"),
    ];
    for (message, want) in cases {
        let r = say(&s, &owner, &message).await;
        assert!(reply(&r).contains(want), "{message}: {:?}", r.body);
        assert_eq!(r.body["engine"], "rules");
        assert_eq!(r.body["tier"], "full_or_logged_autonomy");
        assert!(r.body.get("confirmation_id").is_none(), "{:?}", r.body);
        assert!(r.text("notice").contains("rule-based"));
    }
    // org_id scopes read-only queries: no organization named, the scoped one.
    let scoped = ask(
        &s,
        &owner,
        json!({"message": "what is my wallet balance", "org_id": org}),
    )
    .await;
    assert!(reply(&scoped).contains("1,500.00 EUR"), "{:?}", scoped.body);
    // Reads keep their roles: a visitor gets the wallet route's refusal.
    let visitor = s.member(&owner, &org, "visitor").await;
    let v = say(
        &s,
        &visitor,
        &format!("what is my wallet balance for org {org}"),
    )
    .await;
    assert!(reply(&v).contains("not allowed"), "{:?}", v.body);
    // Another user's organization is not found (and not confirmed to exist).
    let outsider = s.sign_in("outsider-reader@example.com").await;
    let o = say(
        &s,
        &outsider,
        &format!("what is my wallet balance for org {org}"),
    )
    .await;
    assert!(reply(&o).contains("could not find"), "{:?}", o.body);
    assert!(!reply(&o).contains("Acme"), "{:?}", o.body);
    let scoped_foreign = ask(
        &s,
        &outsider,
        json!({"message": "what is my wallet balance", "org_id": org}),
    )
    .await;
    assert_eq!(scoped_foreign.status, 404);
    // An organization created after a lookup was cached is still found.
    let before = say(&s, &owner, "how many AI tokens does Gamma Reader have").await;
    assert!(
        reply(&before).contains("could not find"),
        "{:?}",
        before.body
    );
    named_org(&s, &owner, "Gamma Reader", "DE").await;
    let after = say(&s, &owner, "how many AI tokens does Gamma Reader have").await;
    assert_eq!(
        reply(&after),
        "Gamma Reader has 0 AI tokens.",
        "{:?}",
        after.body
    );
    // Anything else: the list of what the matcher understands.
    let help = say(&s, &owner, "tell me a joke").await;
    assert!(reply(&help).contains("credit <amount> <currency> to <organization>"));
    // Staff tools are staff's.
    let denied = say(&s, &owner, "show the KYC queue").await;
    assert!(reply(&denied).contains("staff only"), "{:?}", denied.body);
}

#[tokio::test]
async fn job_title_and_bio_change_at_once_and_are_audited() {
    let s = TestStack::spawn().await;
    let me = s.sign_in("titled@example.com").await;
    let r = say(&s, &me, "set my job title to Head of Platform").await;
    assert_eq!(r.body["tier"], "full_or_logged_autonomy");
    assert!(r.text("notice").contains("audit log"));
    let r = say(&s, &me, "Set my bio to I build things and run them.").await;
    assert!(
        reply(&r).contains("I build things and run them"),
        "{:?}",
        r.body
    );
    let p = s.get("/v1/profile", Some(&me)).await;
    assert_eq!(p.body["job_title"], "Head of Platform");
    assert_eq!(p.body["bio"], "I build things and run them");
    let audited = eventually(Duration::from_secs(10), || async {
        let a = s.get("/v1/audit/me", Some(&me)).await;
        let n = a
            .array("")
            .iter()
            .filter(|e| e["action"] == "agent.profile_updated")
            .count();
        (n == 2).then_some(())
    })
    .await;
    assert!(audited.is_some(), "both updates are in the audit log");
    // Identity's own limits still hold (bio at most 2000 characters).
    let long = say(&s, &me, &format!("set my bio to {}", "x".repeat(2001))).await;
    assert!(reply(&long).contains("did not work"), "{:?}", long.body);
}

#[tokio::test]
async fn staged_actions_run_only_when_confirmed_and_only_once() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("stager@example.com").await;
    let org = named_org(&s, &owner, "Acme Stage GmbH", "DE").await;
    let added = s
        .add_member(&owner, &org, "staff@example.com", "finance")
        .await;
    assert_eq!(added.status, 200);

    // create_org: staged with the country resolved; created on confirm.
    let (id, summary) = stage(
        &s,
        &owner,
        "create an organization named Beta Labs in Germany",
    )
    .await;
    assert_eq!(
        summary,
        "Create the organization \"Beta Labs\" (corporate) in Germany (DE)"
    );
    let before = s.get("/v1/organizations", Some(&owner)).await;
    assert_eq!(before.body.as_array().map(Vec::len), Some(1));
    let c = confirm(&s, &owner, &id).await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(c.body["status"], "executed");
    assert_eq!(c.body["result"]["name"], "Beta Labs");
    assert_eq!(c.body["result"]["country"], "DE");
    let after = s.get("/v1/organizations", Some(&owner)).await;
    assert_eq!(after.body.as_array().map(Vec::len), Some(2));
    let again = confirm(&s, &owner, &id).await;
    assert_eq!(
        (again.status, again.error()),
        (409, "this action was already confirmed")
    );

    // credit_wallet (staff): the organization's name and currency resolved.
    let (id, summary) = stage(&s, &staff, "credit 1,500.00 EUR to Acme Stage GmbH").await;
    assert_eq!(summary, "Credit 1,500.00 EUR to Acme Stage GmbH's wallet");
    assert_eq!(wallet_minor(&s, &staff, &org).await, 0);
    let c = confirm(&s, &staff, &id).await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(wallet_minor(&s, &staff, &org).await, 150000);
    // The wrong currency is refused before anything is staged.
    let wrong = say(&s, &staff, "credit 10 TRY to Acme Stage GmbH").await;
    assert_eq!(wrong.body["tier"], "full_or_logged_autonomy");
    assert!(
        reply(&wrong).contains("is in EUR, not TRY"),
        "{:?}",
        wrong.body
    );

    // grant_tokens, rejected: nothing happens, and it cannot be taken again.
    let (id, summary) = stage(&s, &staff, "grant 5000 tokens to Acme Stage GmbH").await;
    assert_eq!(summary, "Grant 5,000 AI tokens to Acme Stage GmbH");
    let r = reject(&s, &staff, &id).await;
    assert_eq!((r.status, &r.body["status"]), (200, &json!("cancelled")));
    assert_eq!(tokens(&s, &owner, &org).await, 0);
    let c = confirm(&s, &staff, &id).await;
    assert_eq!((c.status, c.error()), (409, "this action was rejected"));
    assert_eq!(reject(&s, &staff, &id).await.status, 409);
    // ... and confirmed: granted.
    let (id, _) = stage(&s, &staff, "grant 5000 tokens to Acme Stage GmbH").await;
    assert_eq!(confirm(&s, &staff, &id).await.status, 200);
    assert_eq!(tokens(&s, &owner, &org).await, 5000);

    // revoke_session: the other session stops working on confirm.
    let other = s.sign_in("stager@example.com").await;
    let sessions = s.get("/v1/auth/sessions", Some(&owner)).await;
    let other_id = sessions
        .array("")
        .iter()
        .find(|x| x["current"] == false)
        .map(|x| x.text("id").to_owned())
        .expect("a session that is not the current one");
    let (id, summary) = stage(&s, &owner, &format!("revoke session {other_id}")).await;
    assert!(
        summary.starts_with(&format!("Revoke session {other_id} (from ")),
        "{summary}"
    );
    assert_eq!(s.get("/v1/profile", Some(&other)).await.status, 200);
    assert_eq!(confirm(&s, &owner, &id).await.status, 200);
    let gone = eventually(Duration::from_secs(5), || async {
        (s.get("/v1/profile", Some(&other)).await.status == 401).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the revoked session is refused");
    // A session that is not the caller's is not staged.
    let none = say(
        &s,
        &owner,
        &format!("revoke session {}", uuid::Uuid::new_v4()),
    )
    .await;
    assert_eq!(none.body["tier"], "full_or_logged_autonomy");

    // The staged records keep exactly what the summaries showed.
    let (kind, args): (String, Value) = sqlx::query!(
        r#"SELECT kind AS "c0!", args AS "c1!" FROM agent.staged_actions WHERE summary LIKE 'Credit%' LIMIT 1"#,
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .expect("a staged credit");
    assert_eq!(kind, "credit_wallet");
    assert_eq!(args["amount_minor"], 150000);
    assert_eq!(args["currency"], "EUR");
    assert_eq!(args["org_id"], json!(org));
}

#[tokio::test]
async fn twenty_concurrent_confirms_run_the_action_once() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("racer@example.com").await;
    let org = named_org(&s, &owner, "Race Corp", "TR").await;
    assert_eq!(
        s.add_member(&owner, &org, "staff@example.com", "finance")
            .await
            .status,
        200
    );
    let (id, summary) = stage(&s, &staff, "credit 10 TRY to Race Corp").await;
    assert_eq!(summary, "Credit 10.00 TRY to Race Corp's wallet");
    let answers = futures::future::join_all((0..20).map(|_| confirm(&s, &staff, &id))).await;
    let ok = answers.iter().filter(|r| r.status == 200).count();
    let conflicts = answers.iter().filter(|r| r.status == 409).count();
    assert_eq!(
        (ok, conflicts),
        (1, 19),
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(wallet_minor(&s, &staff, &org).await, 1000);
    let rows: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM org_billing.wallet_transactions WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .unwrap_or(-1);
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn confirmation_runs_with_the_callers_authority_at_that_moment() {
    let s = TestStack::spawn().await;
    let owner = s.sign_in("notstaff@example.com").await;
    let org = named_org(&s, &owner, "Plain Org", "TR").await;
    // Staging is not authorization: an owner who is not staff may stage a
    // credit, and confirming it gets the credit route's own 403.
    let (id, summary) = stage(&s, &owner, "credit 100 TRY to Plain Org").await;
    assert_eq!(summary, "Credit 100.00 TRY to Plain Org's wallet");
    let c = confirm(&s, &owner, &id).await;
    let direct = s.credit(&owner, &org, 10000).await;
    assert_eq!((c.status, c.error()), (direct.status, direct.error()));
    assert_eq!(c.status, 403);
    let w = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(&owner))
        .await;
    assert_eq!(w.body["balance_minor"], 0);
    // It ran (and failed) once: it cannot be confirmed again.
    assert_eq!(confirm(&s, &owner, &id).await.status, 409);
}

#[tokio::test]
async fn staged_actions_belong_to_their_caller_and_expire_after_15_minutes() {
    let s = TestStack::spawn().await;
    let owner = s.sign_in("owner-exp@example.com").await;
    let other = s.sign_in("other-exp@example.com").await;
    named_org(&s, &owner, "Expiring Org", "TR").await;
    let (id, _) = stage(&s, &owner, "create an organization named Later Org in TR").await;
    assert_eq!(confirm(&s, &other, &id).await.status, 404);
    assert_eq!(reject(&s, &other, &id).await.status, 404);
    let unknown = confirm(&s, &owner, &uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(unknown.status, 404);
    let bad = s
        .post(
            "/v1/agent/confirm",
            Some(&owner),
            json!({"confirmation_id": "nope"}),
        )
        .await;
    assert_eq!(bad.status, 400);
    // Still open at 14 minutes (a second action, taken by rejecting it) ...
    let (second, _) = stage(&s, &owner, "create an organization named Other Org in TR").await;
    s.clock.advance(time::Duration::minutes(14));
    assert_eq!(reject(&s, &owner, &second).await.status, 200);
    // ... and expired past 15.
    s.clock.advance(time::Duration::minutes(2));
    let late = confirm(&s, &owner, &id).await;
    assert_eq!(
        (late.status, late.error()),
        (409, "this action expired; ask again")
    );
    assert_eq!(reject(&s, &owner, &id).await.status, 409);
    let orgs = s.get("/v1/organizations", Some(&owner)).await;
    assert_eq!(orgs.body.as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn staff_get_platform_tools() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("kycer@example.com").await;
    let org = named_org(&s, &owner, "Queue Org", "TR").await;
    let sub = s
        .post(
            &format!("/v1/organizations/{org}/kyc"),
            Some(&owner),
            json!({"fields": {"company_name": "Queue Org A.S.", "tax_id": "TX-1", "registration_number": "RN-1"},
                   "address": {"line1": "Cadde 1", "city": "Istanbul", "postal_code": "34000", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert!(sub.status == 200 || sub.status == 201, "{:?}", sub.body);
    let q = say(&s, &staff, "show the KYC queue").await;
    assert!(
        reply(&q).contains("1 KYC submission pending review:"),
        "{:?}",
        q.body
    );
    assert!(reply(&q).contains("Queue Org"), "{:?}", q.body);
    // Staff find any organization, not only their own.
    let f = say(&s, &staff, &format!("find organization {org}")).await;
    assert!(reply(&f).contains("Queue Org (TR"), "{:?}", f.body);
    let fq = say(&s, &staff, "show the fulfilment queue").await;
    assert!(reply(&fq).contains("manual order"), "{:?}", fq.body);
    // Owners do not.
    let f = say(&s, &owner, "find organization Queue Org").await;
    assert!(reply(&f).contains("staff only"), "{:?}", f.body);
}

#[tokio::test]
async fn conversations_hold_the_messages_and_close_with_a_bounded_summary() {
    let s = TestStack::spawn().await;
    let me = s.sign_in("talker@example.com").await;
    let them = s.sign_in("listener@example.com").await;
    let first = say(&s, &me, "show my profile").await;
    let cid = first.text("conversation_id").to_owned();
    let long = format!("tell me {}", "many words ".repeat(200));
    let second = ask(&s, &me, json!({"message": long, "conversation_id": cid})).await;
    assert_eq!(second.body["conversation_id"], json!(cid));
    let list = s.get("/v1/agent/conversations", Some(&me)).await;
    assert_eq!(list.body.as_array().map(Vec::len), Some(1));
    assert_eq!(list.body[0]["closed_at"], Value::Null);
    let msgs = s
        .get(
            &format!("/v1/agent/conversations/{cid}/messages"),
            Some(&me),
        )
        .await;
    let rows = msgs.array("");
    let roles: Vec<&str> = rows.iter().map(|m| m.text("role")).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    // Never across users.
    assert_eq!(
        s.get(
            &format!("/v1/agent/conversations/{cid}/messages"),
            Some(&them)
        )
        .await
        .status,
        404
    );
    assert_eq!(
        s.get("/v1/agent/conversations", Some(&them)).await.body,
        json!([])
    );
    assert_eq!(
        ask(
            &s,
            &them,
            json!({"message": "show my profile", "conversation_id": cid})
        )
        .await
        .status,
        404
    );
    assert_eq!(
        s.post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&them),
            json!({})
        )
        .await
        .status,
        404
    );
    let closed = s
        .post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&me),
            json!({}),
        )
        .await;
    assert_eq!(closed.status, 200, "{:?}", closed.body);
    let summary = closed.text("summary");
    let words = summary.split_whitespace().count();
    assert!((1..=150).contains(&words), "{words} words: {summary}");
    assert!(
        summary.starts_with("2 requests: show my profile | tell me"),
        "{summary}"
    );
    assert!(closed.body["closed_at"].is_string());
    assert_eq!(
        s.post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&me),
            json!({})
        )
        .await
        .status,
        409
    );
    let after = ask(
        &s,
        &me,
        json!({"message": "show my profile", "conversation_id": cid}),
    )
    .await;
    assert_eq!(after.status, 409);
}

#[tokio::test]
async fn soul_is_bounded_in_characters_and_curation_counts_activity() {
    let s = TestStack::spawn().await;
    let me = s.sign_in("soulful@example.com").await;
    let m = s.get("/v1/memory", Some(&me)).await;
    assert_eq!(m.status, 200);
    assert_eq!(
        (
            &m.body["soul_md"],
            &m.body["curation_count"],
            &m.body["last_curated_at"]
        ),
        (&json!(""), &json!(0), &Value::Null)
    );
    // 20,000 two-byte characters pass (40,000 bytes); 20,001 fail.
    let ok = s
        .patch(
            "/v1/memory/soul",
            Some(&me),
            json!({"soul_md": "ş".repeat(20_000)}),
        )
        .await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let too_long = s
        .patch(
            "/v1/memory/soul",
            Some(&me),
            json!({"soul_md": "ş".repeat(20_001)}),
        )
        .await;
    assert_eq!(too_long.status, 400);
    assert!(
        too_long.error().contains("20000 characters"),
        "{}",
        too_long.error()
    );
    // Written as JSON escapes (an emoji as a surrogate pair, 12 bytes, the
    // way json.dumps writes it), 20,000 characters still fit the body limit
    // and 20,001 are the 400 of the rule, not a 413.
    for (n, want) in [(20_000, 200), (20_001, 400)] {
        let escaped = format!("{{\"soul_md\":\"{}\"}}", "\\ud83d\\ude00".repeat(n));
        let r = s
            .http
            .patch(format!("{}/v1/memory/soul", s.core()))
            .bearer_auth(&me)
            .header("content-type", "application/json")
            .body(escaped)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), want, "{n} escaped characters");
    }
    assert_eq!(
        s.patch("/v1/memory/soul", Some(&me), json!({}))
            .await
            .status,
        400
    );
    assert_eq!(
        s.patch("/v1/memory/soul", Some(&me), json!({"soul_md": 5}))
            .await
            .status,
        400
    );
    let kept = s.get("/v1/memory", Some(&me)).await;
    assert_eq!(
        kept.body["soul_md"].as_str().map(|x| x.chars().count()),
        Some(20_000)
    );

    // Activity: creating an organization (org-billing's audit event) and the
    // agent's own logged update, both from NATS.
    named_org(&s, &me, "Memory Org", "TR").await;
    say(&s, &me, "set my job title to Archivist").await;
    let arrived = eventually(Duration::from_secs(10), || async {
        let n: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "v!" FROM agent.activity a JOIN identity.users u ON u.id = a.user_id WHERE u.email = 'soulful@example.com'"#,
        )
            .fetch_one(&s.db)
            .await
.expect("the query");
        (n >= 2).then_some(n)
    })
    .await
    .expect("the activity arrives");
    let c = s.post("/v1/memory/curate", Some(&me), json!({})).await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    assert_eq!(c.body["status"], "curated");
    assert_eq!(c.body["entries_processed"], arrived);
    let m = s.get("/v1/memory", Some(&me)).await;
    assert_eq!(m.body["curation_count"], 1);
    assert!(m.body["last_curated_at"].is_string());
    let memory = m.text("memory_md");
    assert!(memory.contains("- org.created: 1"), "{memory}");
    assert!(memory.contains("- agent.profile_updated: 1"), "{memory}");
    // Again: nothing new to process, the count still advances.
    let again = s.post("/v1/memory/curate", Some(&me), json!({})).await;
    assert_eq!(again.body["entries_processed"], 0);
    assert_eq!(
        s.get("/v1/memory", Some(&me)).await.body["curation_count"],
        2
    );
}

#[tokio::test]
async fn a_redelivered_audit_event_is_one_activity_entry() {
    let s = TestStack::spawn().await;
    let me = s.sign_in("redelivered@example.com").await;
    let uid: hub_domain::UserId =
        serde_json::from_value(s.get("/v1/auth/me", Some(&me)).await.body["user_id"].clone())
            .expect("a user id");
    // The same event twice, as a redelivery would bring it (no JetStream dedup).
    let env = event_contracts::Envelope::new(event_contracts::AuditRecorded {
        actor_user_id: Some(uid),
        action: "test.redelivered".into(),
        subject: format!("user:{uid}"),
        detail: json!({}),
        ip: "127.0.0.1".into(),
    });
    let js = async_nats::jetstream::new(s.nats.clone());
    let subject = s
        .naming
        .subject(<event_contracts::AuditRecorded as event_contracts::Event>::SUBJECT);
    for _ in 0..2 {
        let bytes = serde_json::to_vec(&env).expect("json");
        js.publish(subject.clone(), bytes.into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    // Stored once: once the consumer has handled both copies (nothing left
    // to deliver or to acknowledge), one row.
    let stored = || async {
        sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM agent.activity WHERE event_id = $1"#,
            env.id,
        )
        .fetch_one(&s.db)
        .await
        .unwrap_or(-1)
    };
    s.consumer_caught_up("CORE", "agent-activity").await;
    assert_eq!(stored().await, 1);
    let c = s.post("/v1/memory/curate", Some(&me), json!({})).await;
    assert_eq!(c.body["entries_processed"], 1, "{:?}", c.body);
    let memory = s.get("/v1/memory", Some(&me)).await;
    assert!(
        memory.text("memory_md").contains("- test.redelivered: 1"),
        "{:?}",
        memory.body
    );
}

/// Wait (at most 30 s) for five scheduled passes of the two replicas that
/// started after this call. Every pass first rewrites the user's memory row
/// (the timezone it learned from identity; a curation already done this
/// night changes nothing else), so each new row version is a pass; of five,
/// one replica made three, and its middle pass began after this call (its
/// passes follow each other) and ended before the third: a whole pass made
/// its decision after this call.
async fn five_passes(s: &TestStack, user: &str) {
    let version = || async {
        sqlx::query_scalar!(
            "SELECT xmin::text FROM agent.memory_docs WHERE user_id = $1::uuid",
            uuid::Uuid::parse_str(user).expect("a uuid"),
        )
        .fetch_one(&s.db)
        .await
        .expect("the memory row")
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = version().await;
    let mut seen = 0;
    while seen < 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "five scheduled passes within 30 s (saw {seen})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let v = version().await;
        if v != last {
            seen += 1;
            last = v;
        }
    }
}

#[tokio::test]
async fn scheduled_curation_runs_once_per_local_night_across_two_replicas() {
    let s = TestStack::spawn().await;
    let me = s.sign_in("nightly@example.com").await;
    let uid = s
        .get("/v1/auth/me", Some(&me))
        .await
        .text("user_id")
        .to_owned();
    let p = s
        .patch(
            "/v1/profile",
            Some(&me),
            json!({"timezone": "Europe/Istanbul"}),
        )
        .await;
    assert_eq!(p.status, 200);
    let soul = s
        .patch(
            "/v1/memory/soul",
            Some(&me),
            json!({"soul_md": "night owl"}),
        )
        .await;
    assert_eq!(soul.status, 200);
    // Two replicas whose clock is at 03:00 in Istanbul (00:00 UTC) next night.
    let clock = service_kit::Clock::system();
    let now = time::OffsetDateTime::now_utc();
    let next_midnight = (now.date() + time::Duration::days(1))
        .midnight()
        .assume_utc();
    clock.advance(next_midnight - now);
    let cancel = tokio_util::sync::CancellationToken::new();
    for _ in 0..2 {
        let app = agent::build(
            s.settings::<agent::Agent>("[curation]\ninterval_secs = 1\n"),
            service_kit::Runtime {
                cancel: cancel.clone(),
                clock: clock.clone(),
                listener: Default::default(),
                dev: false,
            },
        )
        .await
        .expect("an agent replica");
        tokio::spawn(app.run_until_stopped());
    }
    let count = || async {
        s.get("/v1/memory", Some(&me)).await.body["curation_count"]
            .as_i64()
            .unwrap_or(-1)
    };
    let first = eventually(Duration::from_secs(15), || async {
        (count().await >= 1).then_some(())
    })
    .await;
    assert!(first.is_some(), "curated in the night window");
    assert_eq!(count().await, 1);
    // More passes of the replicas, decided after that curation: still once
    // this night.
    five_passes(&s, &uid).await;
    assert_eq!(count().await, 1);
    // Outside the window (noon there): nothing.
    clock.advance(time::Duration::hours(9));
    five_passes(&s, &uid).await;
    assert_eq!(count().await, 1);
    // The next night: once more.
    clock.advance(time::Duration::hours(15));
    let second = eventually(Duration::from_secs(15), || async {
        (count().await == 2).then_some(())
    })
    .await;
    assert!(second.is_some(), "curated again the next night");
    five_passes(&s, &uid).await;
    assert_eq!(count().await, 2);
    cancel.cancel();
}

/// A local OpenAI-compatible provider. The last user message picks what it
/// does: `MODEL:plain`, `MODEL:profile` (a tool call), `MODEL:stage` (a staged
/// tool call), `MODEL:slow` (past the timeout), `MODEL:error` (a 500),
/// `MODEL:soul` (says whether the soul reached the system prompt). Every
/// answer costs 40 tokens.
fn provider() -> String {
    tests_e2e::stand_in(|req: &HttpRequest, body: web::Bytes| {
        if req.path() != "/v1/chat/completions" {
            return HttpResponse::NotFound().finish();
        }
        let b: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let messages = b.array("messages");
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let user = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        let answer = |message: Value| {
            HttpResponse::Ok().json(json!({
                "id": "c1", "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}
            }))
        };
        let tool = |name: &str, args: Value| {
            answer(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": name, "arguments": args.to_string()}}]}))
        };
        if last["role"] == "tool" {
            return answer(json!({"role": "assistant",
                "content": format!("From the tool: {}", last.text("content"))}));
        }
        if user.starts_with("MODEL:profile") {
            tool("profile", json!({}))
        } else if user.starts_with("MODEL:stage") {
            tool("grant_tokens", json!({"org": "Model Org", "amount": "100"}))
        } else if user.starts_with("MODEL:slow") {
            std::thread::sleep(Duration::from_millis(1500));
            answer(json!({"role": "assistant", "content": "too late"}))
        } else if user.starts_with("MODEL:error") {
            HttpResponse::InternalServerError().json(json!({"error": {"message": "boom"}}))
        } else if user.starts_with("MODEL:soul") {
            let system = messages
                .first()
                .and_then(|m| m["content"].as_str())
                .unwrap_or("");
            let seen = system.contains("MARKER-SOUL");
            answer(json!({"role": "assistant", "content": format!("soul seen: {seen}")}))
        } else if user.starts_with("MODEL:memory") {
            let system = messages
                .first()
                .and_then(|m| m["content"].as_str())
                .unwrap_or("");
            let seen = system.contains("What you remember of their activity\nHello from the model");
            answer(json!({"role": "assistant", "content": format!("memory seen: {seen}")}))
        } else if user.contains("LONGSUMMARY") {
            // A summary far over the bound.
            answer(json!({"role": "assistant", "content": "word ".repeat(400)}))
        } else {
            answer(json!({"role": "assistant", "content": "Hello from the model"}))
        }
    })
}

async fn spent(s: &TestStack, token: &str, org: &str, user: &str) -> Value {
    s.get(
        &format!("/v1/organizations/{org}/members/{user}/ai"),
        Some(token),
    )
    .await
    .body
}

#[tokio::test]
async fn the_model_answers_with_tools_pays_in_tokens_and_falls_back_to_rules() {
    let base = provider();
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: format!(
            "[model]\nbase_url = \"{base}/v1\"\ntimeout_ms = 700\nmodel = \"test-model\"\n"
        ),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("modeler@example.com").await;
    let me = s.get("/v1/auth/me", Some(&owner)).await;
    let uid = me.text("user_id").to_owned();
    let org = named_org(&s, &owner, "Model Org", "TR").await;
    // No tokens yet: 402 before the model runs.
    let broke = ask(&s, &owner, json!({"message": "MODEL:plain hi"})).await;
    assert_eq!(broke.status, 402, "{:?}", broke.body);
    let g = s.grant(&staff, &org, 1000).await;
    assert_eq!(g.status, 200);

    let r = say(&s, &owner, "MODEL:plain hi").await;
    assert_eq!(reply(&r), "Hello from the model");
    assert_eq!(r.body["engine"], "model:test-model");
    assert_eq!(tokens(&s, &owner, &org).await, 960);
    assert_eq!(spent(&s, &owner, &org, &uid).await["tokens_spent"], 40);

    // A tool call: the same operation as the rules, two paid rounds.
    let r = say(&s, &owner, "MODEL:profile").await;
    assert!(
        reply(&r).contains("- email: modeler@example.com"),
        "{:?}",
        r.body
    );
    assert_eq!(r.body["tier"], "full_or_logged_autonomy");
    assert_eq!(tokens(&s, &owner, &org).await, 880);

    // A staged tool call: staged, never run by the model.
    let r = say(&s, &owner, "MODEL:stage").await;
    assert_eq!(r.body["tier"], "confirmation_required", "{:?}", r.body);
    assert_eq!(r.body["action_summary"], "Grant 100 AI tokens to Model Org");
    assert_eq!(tokens(&s, &owner, &org).await, 840);

    // The soul reaches the model's context.
    let soul = s
        .patch(
            "/v1/memory/soul",
            Some(&owner),
            json!({"soul_md": "I am MARKER-SOUL."}),
        )
        .await;
    assert_eq!(soul.status, 200);
    let r = say(&s, &owner, "MODEL:soul").await;
    assert_eq!(reply(&r), "soul seen: true");
    assert_eq!(tokens(&s, &owner, &org).await, 800);

    // A provider timeout and a provider error: the rules answer, nothing spent.
    // Each by its own path: the error is the provider's 500, not a timeout
    // (the stand-in answers it at once, whatever the slow answer still holds).
    for (m, path) in [
        ("MODEL:slow", "the model provider did not answer within"),
        ("MODEL:error", "the model provider answered 500"),
    ] {
        let r = say(&s, &owner, m).await;
        assert_eq!(r.body["engine"], "rules", "{m}: {:?}", r.body);
        let notice = r.text("notice");
        assert!(
            notice.contains("model provider failed") && notice.contains(path),
            "{m}: {:?}",
            r.body
        );
        assert_eq!(tokens(&s, &owner, &org).await, 800, "{m}");
    }
    let r = say(&s, &owner, "MODEL:error show my profile").await;
    assert_eq!(r.body["engine"], "rules");
    // The matcher does not know the prefix: it lists what it understands.
    assert!(reply(&r).contains("I understand"), "{:?}", r.body);
    // Each call counted by its outcome; the tokens counted are those paid.
    let m = s.scrape("agent").await;
    let calls = |outcome: &str| {
        tests_e2e::sample(
            &m,
            &format!("hub_agent_model_calls_total{{engine=\"test-model\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(
        (calls("timeout"), calls("status")),
        (Some(1.0), Some(2.0)),
        "{m}"
    );
    assert!(calls("ok").is_some_and(|n| n >= 4.0), "{m}");
    assert_eq!(
        tests_e2e::sample(&m, "hub_agent_model_tokens_total{engine=\"test-model\"}"),
        Some(200.0),
        "1000 granted, 800 left: {m}"
    );

    // The member's personal limit: exhausted is a 402.
    let dev = s.member(&owner, &org, "developer").await;
    let dev_me = s.get("/v1/auth/me", Some(&dev)).await;
    let dev_id = dev_me.text("user_id").to_owned();
    let set = eventually(Duration::from_secs(10), || async {
        let r = s
            .patch(
                &format!("/v1/organizations/{org}/members/{dev_id}/ai"),
                Some(&owner),
                json!({"token_limit": 50}),
            )
            .await;
        (r.status == 200).then_some(r)
    })
    .await
    .expect("the member's settings change");
    assert_eq!(
        (
            &set.body["token_limit"],
            &set.body["ai_enabled"],
            &set.body["tokens_spent"]
        ),
        (&json!(50), &json!(true), &json!(0))
    );
    // A developer cannot change them.
    assert_eq!(
        s.patch(
            &format!("/v1/organizations/{org}/members/{dev_id}/ai"),
            Some(&dev),
            json!({"token_limit": 5000}),
        )
        .await
        .status,
        403
    );
    let r = say(&s, &dev, "MODEL:plain hi").await;
    assert_eq!(r.body["engine"], "model:test-model");
    assert_eq!(spent(&s, &dev, &org, &dev_id).await["tokens_spent"], 40);
    // 40 of 50 spent: the allowance (10) passes, the next 40-token round
    // does not fit the limit and is refused unspent.
    let over = ask(&s, &dev, json!({"message": "MODEL:plain hi"})).await;
    assert_eq!(over.status, 402, "{:?}", over.body);
    assert_eq!(
        over.error(),
        "your personal AI-token limit in this organization is exhausted"
    );
    assert_eq!(spent(&s, &dev, &org, &dev_id).await["tokens_spent"], 40);
    assert_eq!(tokens(&s, &owner, &org).await, 760);
    // AI disabled for the member: 403.
    let off = s
        .patch(
            &format!("/v1/organizations/{org}/members/{dev_id}/ai"),
            Some(&owner),
            json!({"ai_enabled": false, "token_limit": null}),
        )
        .await;
    assert_eq!(off.status, 200);
    let denied = ask(&s, &dev, json!({"message": "MODEL:plain hi"})).await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        denied.error(),
        "AI is disabled for you in this organization"
    );
    named_org(&s, &owner, "Second Org", "TR").await;
    // Several organizations and no org_id: the rules answer, with a notice.
    let r = say(&s, &owner, "show my profile").await;
    assert_eq!(r.body["engine"], "rules");
    assert!(r.text("notice").contains("pass org_id"));
    // Staff choose the model; others may not.
    assert_eq!(
        s.call(
            "PUT",
            &format!("{}/v1/agent/model", s.core()),
            Some(&owner),
            Some(json!({"model": "x"})),
            &[]
        )
        .await
        .status,
        403
    );
    let set = s
        .call(
            "PUT",
            &format!("{}/v1/agent/model", s.core()),
            Some(&staff),
            Some(json!({"model": "other-model"})),
            &[],
        )
        .await;
    assert_eq!(set.status, 200, "{:?}", set.body);
    let got = s.get("/v1/agent/model", Some(&staff)).await;
    assert_eq!(
        (&got.body["model"], &got.body["provider_configured"]),
        (&json!("other-model"), &json!(true))
    );
    let r = ask(&s, &owner, json!({"message": "MODEL:plain", "org_id": org})).await;
    assert_eq!(r.body["engine"], "model:other-model", "{:?}", r.body);
    // With a provider, the summary and the memory are the model's.
    let cid = r.text("conversation_id");
    let closed = s
        .post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&owner),
            json!({}),
        )
        .await;
    assert_eq!(
        closed.body["summary"], "Hello from the model",
        "{:?}",
        closed.body
    );
    let c = s.post("/v1/memory/curate", Some(&owner), json!({})).await;
    assert_eq!(c.status, 200);
    let m = s.get("/v1/memory", Some(&owner)).await;
    assert_eq!(m.body["memory_md"], "Hello from the model", "{:?}", m.body);
    // The curated memory reaches the model's context too.
    let r = ask(
        &s,
        &owner,
        json!({"message": "MODEL:memory", "org_id": org}),
    )
    .await;
    assert_eq!(reply(&r), "memory seen: true", "{:?}", r.body);
    // A model-written summary is held to 150 words too.
    let r = ask(
        &s,
        &owner,
        json!({"message": "MODEL:plain LONGSUMMARY", "org_id": org}),
    )
    .await;
    let cid = r.text("conversation_id");
    let closed = s
        .post(
            &format!("/v1/agent/conversations/{cid}/close"),
            Some(&owner),
            json!({}),
        )
        .await;
    let summary = closed.text("summary");
    assert!(summary.starts_with("word word"), "{summary}");
    assert_eq!(summary.split_whitespace().count(), 150, "{summary}");
}
