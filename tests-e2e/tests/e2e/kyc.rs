//! KYC through the gateway: submissions per legal type, staff review, the
//! legal identity lock, read-your-writes on the organization, sealed payloads
//! and the minimization sweep.

use futures::future::join_all;
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, Resp, StackOptions, TestStack};

async fn org(s: &TestStack, email: &str, legal_type: &str) -> (String, String) {
    let owner = s.sign_in(email).await;
    let r = s
        .post(
            "/v1/organizations",
            Some(&owner),
            json!({"name": "Acme Ltd", "legal_type": legal_type, "country": "TR"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    (owner, r.text("id").to_owned())
}

fn address() -> Value {
    json!({"line1": "Kizilay Cd. 1", "city": "Ankara", "postal_code": "06420", "country": "TR"})
}

fn corporate(name: &str) -> Value {
    json!({"fields": {"company_name": name, "tax_id": "TX-7781", "registration_number": "RN-1"},
           "address": address(), "notice_acked": true})
}

fn individual() -> Value {
    json!({"fields": {"full_name": "Ayse Yilmaz", "national_id": "NID-55501234"},
           "address": address(), "notice_acked": true})
}

async fn submit(s: &TestStack, token: &str, org: &str, body: Value) -> Resp {
    s.post(&format!("/v1/organizations/{org}/kyc"), Some(token), body)
        .await
}

async fn decide(s: &TestStack, staff: &str, id: &str, what: &str, body: Value) -> Resp {
    s.post(&format!("/v1/admin/kyc/{id}/{what}"), Some(staff), body)
        .await
}

fn id(r: &Resp) -> String {
    r.text("id").to_owned()
}

async fn detail(s: &TestStack, token: &str, org: &str) -> Value {
    let r = s
        .get(&format!("/v1/organizations/{org}"), Some(token))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
}

#[tokio::test]
async fn submissions_are_validated_by_the_organizations_legal_type() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-corp@example.com", "corporate").await;
    let (owner2, ind) = org(&s, "kyc-ind@example.com", "individual").await;
    let cases = [
        (
            &owner,
            &corp,
            individual(),
            "fields.full_name is not a field of a corporate organization",
        ),
        (
            &owner2,
            &ind,
            corporate("Acme"),
            "fields.company_name is not a field of an individual organization",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A"}, "address": address(), "notice_acked": true}),
            "fields.tax_id is required for a corporate organization",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A", "tax_id": 12}, "address": address(), "notice_acked": true}),
            "fields.tax_id must be a string",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "", "tax_id": "1"}, "address": address(), "notice_acked": true}),
            "fields.company_name must not be empty",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "x".repeat(201), "tax_id": "1"}, "address": address(), "notice_acked": true}),
            "fields.company_name must be at most 200 characters, without control characters",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A", "tax_id": "1"},
                               "address": {"line1": "x", "city": "y", "postal_code": "1", "country": "ZZ"}, "notice_acked": true}),
            "address.country must be an ISO 3166-1 alpha-2 code",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A", "tax_id": "1"},
                               "address": {"line1": "x", "city": "y", "postal_code": 1, "country": "TR"}, "notice_acked": true}),
            "address.postal_code must be a string",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A", "tax_id": "1"}, "notice_acked": true}),
            "address is required",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A", "tax_id": "1"}, "address": address(), "notice_acked": false}),
            "notice_acked must be true: acknowledge the privacy notice",
        ),
        (
            &owner,
            &corp,
            json!({"fields": {"company_name": "A", "tax_id": "1"}, "address": address()}),
            "notice_acked is required",
        ),
        (
            &owner,
            &corp,
            json!({"fields": "A", "address": address(), "notice_acked": true}),
            "fields must be an object",
        ),
    ];
    for (token, org, body, want) in cases {
        let r = submit(&s, token, org, body.clone()).await;
        assert_eq!((r.status, r.error()), (400, want), "{body}");
    }
    // Malformed, wrong content and huge bodies: JSON 4xx, never a 500.
    let url = format!("{}/v1/organizations/{corp}/kyc", s.core());
    let raw = |body: String| {
        let (url, owner) = (url.clone(), owner.clone());
        let http = s.http.clone();
        async move {
            let r = http
                .post(url)
                .bearer_auth(owner)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("send");
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            (status, body)
        }
    };
    let (st, b) = raw("{\"fields\":".into()).await;
    assert_eq!(
        (st, b["error"].as_str()),
        (400, Some("malformed JSON body"))
    );
    let (st, b) = raw(format!("{{\"x\":\"{}\"}}", "a".repeat(70_000))).await;
    assert_eq!(st, 413, "{b}");
    assert!(b["error"].is_string());
    // Nothing was stored; a valid submission is.
    let ok = submit(&s, &owner2, &ind, individual()).await;
    assert_eq!(ok.status, 201, "{:?}", ok.body);
    assert_eq!(ok.body["status"], "pending");
    assert_eq!(ok.body["fields"]["national_id"], "NID-55501234");
    assert_eq!(ok.body["requested_fields"], json!([]));
    assert!(ok.body["purged_at"].is_null() && ok.body["reviewed_at"].is_null());
    let rows: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM kyc.submissions"#,)
        .fetch_one(&s.db)
        .await
        .expect("count");
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn admins_submit_members_read_and_outsiders_see_nothing() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-roles@example.com", "corporate").await;
    let visitor = s.member(&owner, &corp, "visitor").await;
    let manager = s.member(&owner, &corp, "manager").await;
    let outsider = s.sign_in("kyc-outsider@example.com").await;
    let r = submit(&s, &visitor, &corp, corporate("Acme")).await;
    assert_eq!(r.status, 403);
    assert!(
        r.error().contains("owner") && r.error().contains("manager"),
        "{}",
        r.error()
    );
    let r = submit(&s, &outsider, &corp, corporate("Acme")).await;
    assert_eq!((r.status, r.error()), (404, "not found"));
    let missing = uuid::Uuid::new_v4();
    assert_eq!(
        submit(&s, &owner, &missing.to_string(), corporate("A"))
            .await
            .status,
        404
    );
    let r = submit(&s, &manager, &corp, corporate("Acme")).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    // A visitor sees the status only (personal_data.rs has every role).
    let list = s
        .get(&format!("/v1/organizations/{corp}/kyc"), Some(&visitor))
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body[0]["status"], "pending");
    assert!(list.body[0].get("fields").is_none(), "{:?}", list.body);
    let list = s
        .get(&format!("/v1/organizations/{corp}/kyc"), Some(&outsider))
        .await;
    assert_eq!(list.status, 404);
    // Staff endpoints: 403 for the owner, 404 for an unknown submission.
    let staff = s.sign_in("staff@example.com").await;
    assert_eq!(s.get("/v1/admin/kyc", Some(&owner)).await.status, 403);
    let r = decide(&s, &owner, &id(&r), "approve", json!({})).await;
    assert_eq!((r.status, r.error()), (403, "staff only"));
    let r = decide(
        &s,
        &staff,
        &uuid::Uuid::new_v4().to_string(),
        "approve",
        json!({}),
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn one_pending_submission_per_organization_even_when_concurrent() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-pending@example.com", "corporate").await;
    let both =
        join_all((0..4).map(|i| submit(&s, &owner, &corp, corporate(&format!("Acme {i}"))))).await;
    let created = both.iter().filter(|r| r.status == 201).count();
    let refused: Vec<_> = both.iter().filter(|r| r.status == 409).collect();
    assert_eq!((created, refused.len()), (1, 3), "{both:?}");
    assert_eq!(
        refused[0].error(),
        "another KYC submission of this organization is pending"
    );
}

#[tokio::test]
async fn approval_verifies_raises_the_tier_and_locks_the_legal_identity_at_once() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-approve@example.com", "corporate").await;
    let staff = s.sign_in("staff@example.com").await;
    let first = submit(&s, &owner, &corp, corporate("Acme Holding AS")).await;
    // Read-your-writes: pending the moment the submission returns.
    assert_eq!(detail(&s, &owner, &corp).await["kyc_status"], "pending");
    let list = s.get("/v1/organizations", Some(&owner)).await;
    assert_eq!(list.body[0]["kyc_status"], "pending");
    let queue = s.get("/v1/admin/kyc", Some(&staff)).await;
    assert_eq!(queue.status, 200);
    assert_eq!(queue.body[0]["id"], first.body["id"]);
    assert_eq!(queue.body[0]["org_name"], "Acme Ltd");
    assert_eq!(queue.body[0]["fields"]["tax_id"], "TX-7781");
    let r = decide(
        &s,
        &staff,
        &id(&first),
        "approve",
        json!({"notes": "documents match"}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (r.body["status"].as_str(), r.body["review_notes"].as_str()),
        (Some("approved"), Some("documents match"))
    );
    let d = detail(&s, &owner, &corp).await;
    assert_eq!(d["kyc_status"], "verified");
    assert_eq!(d["kyc_tier"], 1);
    assert_eq!(d["kyc_locked"], true);
    assert_eq!(d["legal_name"], "Acme Holding AS");
    assert_eq!(d["tax_id"], "TX-7781");
    assert_eq!(d["registration_number"], "RN-1");
    assert_eq!(d["registered_address"]["city"], "Ankara");
    assert_eq!(d["registered_address"]["line2"], "");
    let verified_at = d.text("kyc_verified_at").to_owned();
    let year: i32 = verified_at[..4].parse().expect("a year");
    assert_eq!(
        d["kyc_retention_until"].as_str().map(|r| r[..4].to_owned()),
        Some((year + 10).to_string())
    );
    assert_eq!(&d.text("kyc_retention_until")[4..10], &verified_at[4..10]);
    // Reviewed once: every later decision is a 409.
    for what in ["approve", "reject", "request-info"] {
        let body = if what == "request-info" {
            json!({"requested_fields": ["fields.tax_id"]})
        } else {
            json!({})
        };
        let again = decide(&s, &staff, &id(&first), what, body).await;
        assert_eq!(again.status, 409, "{what}: {:?}", again.body);
        assert_eq!(
            again.error(),
            "this submission was already reviewed (approved)"
        );
    }
    assert_eq!(s.get("/v1/admin/kyc", Some(&staff)).await.body, json!([]));
    // Audit: the submitter's and the reviewer's own histories, without the data.
    let mine = s.get("/v1/audit/me", Some(&owner)).await;
    let theirs = s.get("/v1/audit/me", Some(&staff)).await;
    let has = |r: &Resp, action: &str| {
        r.body
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["action"] == action)
    };
    let found = eventually(Duration::from_secs(10), || async {
        let mine = s.get("/v1/audit/me", Some(&owner)).await;
        let theirs = s.get("/v1/audit/me", Some(&staff)).await;
        (has(&mine, "kyc.submitted") && has(&theirs, "kyc.approved")).then_some((mine, theirs))
    })
    .await;
    let (mine, theirs) = found.unwrap_or((mine, theirs));
    assert!(has(&mine, "kyc.submitted"), "{:?}", mine.body);
    assert!(has(&theirs, "kyc.approved"), "{:?}", theirs.body);
    assert!(
        !mine.body.to_string().contains("TX-7781") && !theirs.body.to_string().contains("TX-7781")
    );
}

#[tokio::test]
async fn of_concurrent_approvals_exactly_one_wins() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-race@example.com", "corporate").await;
    let staff = s.sign_in("staff@example.com").await;
    let sub = id(&submit(&s, &owner, &corp, corporate("Race AS")).await);
    let all = join_all((0..6).map(|i| {
        decide(
            &s,
            &staff,
            &sub,
            if i % 3 == 2 { "reject" } else { "approve" },
            json!({}),
        )
    }))
    .await;
    let won = all.iter().filter(|r| r.status == 200).count();
    let lost = all.iter().filter(|r| r.status == 409).count();
    assert_eq!((won, lost), (1, 5), "{all:?}");
    let d = detail(&s, &owner, &corp).await;
    assert!(d["kyc_tier"] == 1 || d["kyc_status"] == "rejected", "{d}");
    assert!(d["kyc_tier"].as_i64() <= Some(1));
}

#[tokio::test]
async fn later_submissions_reopen_review_without_touching_the_verified_record() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-again@example.com", "corporate").await;
    let staff = s.sign_in("staff@example.com").await;
    // Rejected before any approval: the organization is rejected, notes kept.
    let a = id(&submit(&s, &owner, &corp, corporate("First AS")).await);
    let r = decide(&s, &staff, &a, "reject", json!({"notes": "blurry scan"})).await;
    assert_eq!(r.body["review_notes"], "blurry scan");
    assert_eq!(detail(&s, &owner, &corp).await["kyc_status"], "rejected");
    // Approved: verified, tier 1, identity locked.
    let b = id(&submit(&s, &owner, &corp, corporate("Second AS")).await);
    assert_eq!(
        decide(&s, &staff, &b, "approve", json!({})).await.status,
        200
    );
    // A later submission re-opens review; the verified record stays.
    let c = id(&submit(&s, &owner, &corp, corporate("Third AS")).await);
    let d = detail(&s, &owner, &corp).await;
    assert_eq!(
        (d["kyc_status"].as_str(), d["legal_name"].as_str()),
        (Some("pending"), Some("Second AS"))
    );
    assert_eq!(d["kyc_locked"], true);
    // Rejecting it leaves the organization verified at tier 1 with its identity.
    assert_eq!(
        decide(&s, &staff, &c, "reject", json!({})).await.status,
        200
    );
    let d = detail(&s, &owner, &corp).await;
    assert_eq!(
        (
            d["kyc_status"].as_str(),
            d["kyc_tier"].as_i64(),
            d["legal_name"].as_str()
        ),
        (Some("verified"), Some(1), Some("Second AS"))
    );
    // Approving a new one replaces the identity and raises the tier.
    let e = id(&submit(&s, &owner, &corp, corporate("Fourth AS")).await);
    assert_eq!(
        decide(&s, &staff, &e, "approve", json!({})).await.status,
        200
    );
    let d = detail(&s, &owner, &corp).await;
    assert_eq!(
        (d["kyc_tier"].as_i64(), d["legal_name"].as_str()),
        (Some(2), Some("Fourth AS"))
    );
    let list = s
        .get(&format!("/v1/organizations/{corp}/kyc"), Some(&owner))
        .await;
    let statuses: Vec<&str> = list
        .body
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["status"].as_str())
        .collect();
    assert_eq!(
        statuses,
        ["approved", "rejected", "approved", "rejected"],
        "newest first"
    );
}

#[tokio::test]
async fn more_information_is_requested_by_field_and_a_corrected_submission_follows() {
    let s = TestStack::spawn().await;
    let (owner, ind) = org(&s, "kyc-info@example.com", "individual").await;
    let staff = s.sign_in("staff@example.com").await;
    let a = id(&submit(&s, &owner, &ind, individual()).await);
    for (body, want) in [
        (json!({}), "requested_fields must be a non-empty array of field keys"),
        (json!({"requested_fields": []}), "requested_fields must be a non-empty array of field keys"),
        (json!({"requested_fields": [3]}), "requested_fields must be a non-empty array of field keys"),
        (json!({"requested_fields": ["fields.tax_id"]}),
         "requested_fields: fields.tax_id is not a key of this submission (one of fields.full_name, fields.national_id, address.city, address.country, address.line1, address.postal_code)"),
        (json!({"requested_fields": ["fields.national_id"], "notes": 5}), "notes must be a string of at most 2000 characters"),
        (json!({"requested_fields": ["fields.national_id"], "extra": 1}), "unknown field extra"),
    ] {
        let r = decide(&s, &staff, &a, "request-info", body.clone()).await;
        assert_eq!((r.status, r.error()), (400, want), "{body}");
    }
    let r = decide(&s, &staff, &a, "request-info",
        json!({"requested_fields": ["fields.national_id", "address.postal_code"], "notes": "ID unreadable"})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "more_info_requested");
    assert_eq!(
        r.body["requested_fields"],
        json!(["fields.national_id", "address.postal_code"])
    );
    assert_eq!(detail(&s, &owner, &ind).await["kyc_status"], "pending");
    // It does not block the corrected submission.
    let b = submit(&s, &owner, &ind, individual()).await;
    assert_eq!(b.status, 201, "{:?}", b.body);
    assert_eq!(
        decide(&s, &staff, &a, "approve", json!({})).await.status,
        409
    );
    assert_eq!(
        decide(&s, &staff, &id(&b), "approve", json!({}))
            .await
            .status,
        200
    );
    let d = detail(&s, &owner, &ind).await;
    assert_eq!(
        (d["legal_name"].as_str(), d["tax_id"].as_str()),
        (Some("Ayse Yilmaz"), Some("NID-55501234"))
    );
}

#[tokio::test]
async fn personal_data_is_sealed_at_rest_and_never_in_events() {
    let s = TestStack::spawn().await;
    let (owner, ind) = org(&s, "kyc-sealed@example.com", "individual").await;
    let staff = s.sign_in("staff@example.com").await;
    let sub = id(&submit(&s, &owner, &ind, individual()).await);
    assert_eq!(
        decide(&s, &staff, &sub, "approve", json!({})).await.status,
        200
    );
    let secrets = ["NID-55501234", "Ayse Yilmaz", "Kizilay"];
    // Every table of the kyc schema, every column, as text.
    let tables: Vec<String> = sqlx::query_scalar!(
        r#"SELECT table_name::text AS "v!" FROM information_schema.tables WHERE table_schema = 'kyc' AND table_type = 'BASE TABLE'"#,
    )
    .fetch_all(&s.db)
    .await
    .expect("tables");
    assert!(tables.len() >= 3, "{tables:?}");
    for t in tables {
        // A runtime string: the table is named by the loop (every table).
        let dump: String = sqlx::query_scalar(&format!(
            "SELECT COALESCE(string_agg(row_to_json(x)::text || encode(convert_to(row_to_json(x)::text, 'UTF8'), 'escape'), ' '), '') FROM kyc.\"{t}\" x"
        ))
        .fetch_one(&s.db)
        .await
        .unwrap_or_else(|e| panic!("kyc.{t}: {e}"));
        for secret in secrets {
            assert!(!dump.contains(secret), "kyc.{t} holds {secret} in clear");
        }
    }
    let raw: Vec<u8> = sqlx::query_scalar!(r#"SELECT payload AS "v!" FROM kyc.submissions"#,)
        .fetch_one(&s.db)
        .await
        .expect("payload");
    assert!(
        !raw.windows(12).any(|w| w == b"NID-55501234"),
        "ciphertext only"
    );
    // The events (CORE stream) and the audit history carry no personal data.
    let js = async_nats::jetstream::new(s.nats.clone());
    let mut stream = js
        .get_stream(s.naming.stream("CORE"))
        .await
        .expect("stream");
    let info = stream.info().await.expect("info").state.clone();
    let mut kyc_events = 0;
    for seq in info.first_sequence..=info.last_sequence {
        if let Ok(m) = stream.get_raw_message(seq).await {
            let text = String::from_utf8_lossy(&m.payload);
            for secret in secrets {
                assert!(
                    !text.contains(secret),
                    "event {seq} ({}) holds {secret}",
                    m.subject
                );
            }
            kyc_events += usize::from(m.subject.ends_with("kyc.changed"));
        }
    }
    assert!(kyc_events >= 2, "{kyc_events}");
    let audit: String = sqlx::query_scalar!(
        r#"SELECT COALESCE(string_agg(detail::text, ' '), '') AS "v!" FROM identity.audit_log"#,
    )
    .fetch_one(&s.db)
    .await
    .expect("audit");
    for secret in secrets {
        assert!(!audit.contains(secret));
    }
}

#[tokio::test]
async fn the_organization_gets_its_kyc_state_through_the_event_when_the_push_fails() {
    // org-billing refuses kyc's push (the route is not listed for it): only the
    // core.v1.kyc.changed event, pulled from kyc, can carry the state.
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml:
            "[assertion.callers.kyc]\nroutes = [\"GET /internal/v1/organizations/*/profile\"]\n"
                .into(),
        ..Default::default()
    })
    .await;
    let (owner, corp) = org(&s, "kyc-event@example.com", "corporate").await;
    let staff = s.sign_in("staff@example.com").await;
    let sub = id(&submit(&s, &owner, &corp, corporate("Evented AS")).await);
    assert_eq!(
        decide(&s, &staff, &sub, "approve", json!({})).await.status,
        200
    );
    let d = eventually(Duration::from_secs(15), || async {
        let d = detail(&s, &owner, &corp).await;
        (d["kyc_status"] == "verified").then_some(d)
    })
    .await
    .expect("the event delivered the state");
    assert_eq!(
        (d["kyc_tier"].as_i64(), d["legal_name"].as_str()),
        (Some(1), Some("Evented AS"))
    );
}

/// Decided submissions of `n` organizations.
async fn decided(s: &TestStack, staff: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let (owner, corp) = org(s, &format!("kyc-sweep-{i}@example.com"), "corporate").await;
        let sub = id(&submit(s, &owner, &corp, corporate("Sweep AS")).await);
        let what = if i % 2 == 0 { "approve" } else { "reject" };
        assert_eq!(
            decide(s, staff, &sub, what, json!({"notes": "n"}))
                .await
                .status,
            200
        );
        ids.push(sub);
    }
    ids
}

async fn kyc_pool(s: &TestStack) -> sqlx::PgPool {
    let url = hub_stack::role_url(&s.database_url, "hub_kyc").expect("url");
    sqlx::PgPool::connect_with(
        url.parse::<sqlx::postgres::PgConnectOptions>()
            .expect("options")
            .options([("search_path", "kyc")]),
    )
    .await
    .expect("kyc pool")
}

#[tokio::test]
async fn raw_payloads_are_redacted_180_days_after_the_decision_and_not_before() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, corp) = org(&s, "kyc-purge@example.com", "corporate").await;
    let sub = id(&submit(&s, &owner, &corp, corporate("Purge AS")).await);
    assert_eq!(
        decide(
            &s,
            &staff,
            &sub,
            "reject",
            json!({"notes": "expired passport"})
        )
        .await
        .status,
        200
    );
    // A pending one is never purged, however old.
    let (owner2, corp2) = org(&s, "kyc-purge-pending@example.com", "corporate").await;
    submit(&s, &owner2, &corp2, corporate("Waiting AS")).await;
    let pool = kyc_pool(&s).await;
    s.clock.advance(time::Duration::days(179));
    assert_eq!(
        kyc::sweep::run_once(&pool, &s.clock, 180)
            .await
            .expect("sweep"),
        Vec::<hub_domain::SubmissionId>::new()
    );
    let list = s
        .get(&format!("/v1/organizations/{corp}/kyc"), Some(&owner))
        .await;
    assert_eq!(
        (
            list.body[0]["fields"]["company_name"].as_str(),
            list.body[0]["review_notes"].as_str()
        ),
        (Some("Purge AS"), Some("expired passport"))
    );
    s.clock.advance(time::Duration::days(2));
    let purged = kyc::sweep::run_once(&pool, &s.clock, 180)
        .await
        .expect("sweep");
    assert_eq!(purged.len(), 1);
    assert_eq!(purged[0].to_string(), sub);
    let list = s
        .get(&format!("/v1/organizations/{corp}/kyc"), Some(&owner))
        .await;
    let row = &list.body[0];
    assert_eq!((&row["fields"], &row["address"]), (&json!({}), &json!({})));
    assert!(row["purged_at"].is_string());
    // The review notes go with the payload (a reviewer's free text may
    // repeat what it saw); the decision and its dates stay.
    assert_eq!(
        (row["status"].as_str(), row["review_notes"].as_str()),
        (Some("rejected"), Some(""))
    );
    assert!(row["created_at"].is_string() && row["reviewed_at"].is_string());
    let (payload_gone, keys_gone, notes): (bool, bool, String) = sqlx::query!(
        r#"SELECT payload IS NULL AS "c0!", field_keys = '{}' AS "c1!", review_notes AS "c2!" FROM kyc.submissions
         WHERE id = $1::uuid"#,
        uuid::Uuid::parse_str(&sub).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1, r.c2))
    .expect("row");
    assert!(payload_gone && keys_gone);
    assert_eq!(notes, "");
    let pending = s
        .get(&format!("/v1/organizations/{corp2}/kyc"), Some(&owner2))
        .await;
    assert_eq!(pending.body[0]["fields"]["company_name"], "Waiting AS");
}

#[tokio::test]
async fn two_replicas_sweeping_at_once_purge_every_row_exactly_once() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let ids = decided(&s, &staff, 12).await;
    let (a, b) = (kyc_pool(&s).await, kyc_pool(&s).await);
    s.clock.advance(time::Duration::days(181));
    let (x, y) = tokio::join!(
        kyc::sweep::run_once(&a, &s.clock, 180),
        kyc::sweep::run_once(&b, &s.clock, 180)
    );
    let (x, y) = (x.expect("replica a"), y.expect("replica b"));
    let mut all: Vec<String> = x.iter().chain(y.iter()).map(|u| u.to_string()).collect();
    all.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(
        all,
        want,
        "each row once, none lost (a {} + b {})",
        x.len(),
        y.len()
    );
    let left: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM kyc.submissions WHERE purged_at IS NULL"#,
    )
    .fetch_one(&s.db)
    .await
    .expect("left");
    assert_eq!(left, 0);
}

#[tokio::test]
async fn bad_decision_bodies_are_json_4xx_and_decide_nothing() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "kyc-baddecision@example.com", "corporate").await;
    let staff = s.sign_in("staff@example.com").await;
    let sub = id(&submit(&s, &owner, &corp, corporate("Bad Input AS")).await);
    let url = format!("{}/v1/admin/kyc/{sub}/approve", s.core());
    for (body, status) in [
        ("{\"notes\":".to_owned(), 400),
        ("[1,2]".to_owned(), 400),
        ("{\"notes\": 42}".to_owned(), 400),
        ("{\"verdict\": \"yes\"}".to_owned(), 400),
        (format!("{{\"notes\":\"{}\"}}", "n".repeat(70_000)), 413),
    ] {
        let r = s
            .http
            .post(&url)
            .bearer_auth(&staff)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("send");
        assert_eq!(
            r.status().as_u16(),
            status,
            "{}",
            &body[..body.len().min(40)]
        );
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(v["error"].is_string(), "{v}");
    }
    let bad_id = s
        .post("/v1/admin/kyc/not-a-uuid/approve", Some(&staff), json!({}))
        .await;
    assert_eq!(bad_id.status, 400);
    // Still pending: nothing was decided.
    assert_eq!(detail(&s, &owner, &corp).await["kyc_status"], "pending");
    assert_eq!(
        decide(&s, &staff, &sub, "approve", json!({})).await.status,
        200
    );
}
