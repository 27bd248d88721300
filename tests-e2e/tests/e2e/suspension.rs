//! Organization suspension through the gateway: staff suspend and reactivate;
//! a suspended organization reads normally while every write of its members
//! and keys answers 403 naming the suspension, in every service that writes;
//! the status travels in the identity (no call), a NATS event updates the
//! gateways' caches, and a late event never undoes a newer change. Writes
//! stop as soon as the suspension answers; what only takes access away
//! (revoking keys, invites and sessions, removing or leaving a membership)
//! goes on while suspended, and staff do it in any organization.

use actix_web::{web, HttpRequest, HttpResponse};
use event_contracts::OrgStatusChanged;
use hub_domain::{OrgId, OrgStatus};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, Resp, StackOptions, TestStack};

const SUSPENDED: &str = "organization suspended: its members and API keys cannot change anything until staff reactivate it";

/// A model that always answers (the agent's writes are what is refused).
fn provider() -> String {
    tests_e2e::stand_in(|req: &HttpRequest, _body: web::Bytes| {
        if req.path() != "/v1/chat/completions" {
            return HttpResponse::NotFound().finish();
        }
        HttpResponse::Ok().json(json!({
            "id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Hello from the model"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        }))
    })
}

/// One write, on the core host or (`product`) the product host.
struct Write {
    what: &'static str,
    product: bool,
    method: &'static str,
    path: String,
    token: String,
    body: Option<Value>,
}

async fn send(s: &TestStack, w: &Write) -> Resp {
    let host = if w.product { s.product() } else { s.core() };
    s.call(
        w.method,
        &format!("{host}{}", w.path),
        Some(&w.token),
        w.body.clone(),
        &[],
    )
    .await
}

fn write(
    what: &'static str,
    method: &'static str,
    path: String,
    token: &str,
    body: Option<Value>,
) -> Write {
    Write {
        what,
        product: false,
        method,
        path,
        token: token.to_owned(),
        body,
    }
}

fn product(what: &'static str, path: &str, token: &str, body: Value) -> Write {
    Write {
        what,
        product: true,
        method: "POST",
        path: path.to_owned(),
        token: token.to_owned(),
        body: Some(body),
    }
}

fn str_of(v: &Value, k: &str) -> String {
    v.text(k).to_owned()
}

#[tokio::test]
async fn a_suspended_organization_reads_but_refuses_every_write_until_reactivated() {
    let base = provider();
    let s = TestStack::spawn_with(StackOptions {
        agent_toml: format!("[model]\nbase_url = \"{base}/v1\"\nmodel = \"test-model\"\n"),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("suspended-owner@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let key = s.create_key(&owner, &org, Some("manager")).await;
    let key = str_of(&key.body, "token");
    let me = s.get("/v1/auth/me", Some(&finance)).await;
    let finance_id = str_of(&me.body, "user_id");
    // The same people in an organization that stays active.
    let other = s.create_org(&owner, "Still Active", "TR").await;
    let other = str_of(&other.body, "id");
    assert_eq!(s.grant(&staff, &org, 1_000).await.status, 200);
    let skus = s
        .call("GET", &format!("{}/v1/skus", s.product()), None, None, &[])
        .await;
    let sku = str_of(&skus.body[0], "id");
    let asked = json!({"message": "MODEL:plain hi", "org_id": org});
    let ok = s.post("/v1/agent", Some(&owner), asked.clone()).await;
    assert_eq!(ok.status, 200, "the agent answers before: {:?}", ok.body);
    // An invite made before, to accept while suspended.
    let invited = s
        .post(
            &format!("/v1/organizations/{org}/invites"),
            Some(&owner),
            json!({"email": "joiner@example.com", "role": "visitor"}),
        )
        .await;
    assert_eq!(invited.status, 201, "{:?}", invited.body);
    let url = str_of(&invited.body, "accept_url");
    let invite_token = url
        .split_once("token=")
        .map(|(_, t)| t.to_owned())
        .expect("a token in the accept URL");
    let joiner = s.sign_in("joiner@example.com").await;
    let accept = json!({"token": invite_token});

    // Only staff, only with a reason, only once.
    let path = format!("/v1/admin/organizations/{org}/suspend");
    let reason = json!({"reason": "unpaid invoices since September"});
    assert_eq!(
        s.post(&path, Some(&owner), reason.clone()).await.status,
        403
    );
    assert_eq!(
        s.post(&path, Some(&staff), json!({"reason": " "}))
            .await
            .status,
        400
    );
    assert_eq!(s.post(&path, Some(&staff), json!({})).await.status, 400);
    let unknown = format!("/v1/admin/organizations/{}/suspend", uuid::Uuid::new_v4());
    assert_eq!(
        s.post(&unknown, Some(&staff), reason.clone()).await.status,
        404
    );
    let r = s.post(&path, Some(&staff), reason.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "suspended");
    assert_eq!(r.body["status_reason"], "unpaid invoices since September");
    assert_eq!(r.body["id"], org.as_str());
    let again = s.post(&path, Some(&staff), reason.clone()).await;
    assert_eq!(
        (again.status, again.error()),
        (409, "the organization is already suspended")
    );
    // Staff see why on the organization itself (not a member: the visitor's
    // view plus the staff fields); its members do not.
    let seen = s
        .get(&format!("/v1/organizations/{org}"), Some(&staff))
        .await;
    assert_eq!(seen.status, 200, "{:?}", seen.body);
    assert_eq!(
        seen.body["staff"]["status_reason"],
        "unpaid invoices since September"
    );
    assert!(seen.body["staff"]["status_changed_at"].is_string());
    let owners = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert!(owners.body.get("staff").is_none(), "{:?}", owners.body);

    // The positive marker: the change reached identity and the gateway's cache.
    let projects = format!("/v1/organizations/{org}/projects");
    let refused = eventually(Duration::from_secs(10), || async {
        let r = s.post(&projects, Some(&owner), json!({"name": "P"})).await;
        (r.status == 403).then_some(r)
    })
    .await
    .expect("the owner's writes were refused");
    assert_eq!(refused.error(), SUSPENDED);

    // Every service that writes refuses its members and its keys.
    let corporate = json!({"fields": {"company_name": "Acme", "tax_id": "TX-1", "registration_number": "RN-1"},
        "address": {"line1": "Cd. 1", "city": "Ankara", "postal_code": "06420", "country": "TR"},
        "notice_acked": true});
    let writes = [
        // A role without the capability hears of the suspension too.
        write(
            "project by finance",
            "POST",
            projects.clone(),
            &finance,
            Some(json!({"name": "P"})),
        ),
        write(
            "project",
            "POST",
            projects.clone(),
            &owner,
            Some(json!({"name": "P"})),
        ),
        write(
            "asset",
            "POST",
            format!("/v1/organizations/{org}/assets"),
            &owner,
            Some(json!({"kind": "link", "name": "Site", "url": "https://example.com/"})),
        ),
        write(
            "payment claim",
            "POST",
            format!("/v1/organizations/{org}/payment-claims"),
            &finance,
            Some(json!({"amount_minor": 9_000, "currency": "TRY", "reference": "EFT 1"})),
        ),
        write(
            "member AI",
            "PATCH",
            format!("/v1/organizations/{org}/members/{finance_id}/ai"),
            &owner,
            Some(json!({"ai_enabled": false})),
        ),
        write(
            "member",
            "POST",
            format!("/v1/organizations/{org}/members"),
            &owner,
            Some(json!({"email": "new@example.com", "role": "visitor"})),
        ),
        write(
            "api key",
            "POST",
            format!("/v1/organizations/{org}/api-keys"),
            &owner,
            Some(json!({"name": "k"})),
        ),
        write(
            "kyc",
            "POST",
            format!("/v1/organizations/{org}/kyc"),
            &owner,
            Some(corporate),
        ),
        write(
            "invite",
            "POST",
            format!("/v1/organizations/{org}/invites"),
            &owner,
            Some(json!({"email": "later@example.com", "role": "visitor"})),
        ),
        write(
            "invite acceptance",
            "POST",
            "/v1/invites/accept".to_owned(),
            &joiner,
            Some(accept.clone()),
        ),
        write(
            "agent",
            "POST",
            "/v1/agent".to_owned(),
            &owner,
            Some(asked.clone()),
        ),
        product(
            "server",
            "/v1/servers",
            &owner,
            json!({"org_id": org, "sku_id": sku, "hostname": "web-1"}),
        ),
        product(
            "server by key",
            "/v1/servers",
            &key,
            json!({"org_id": org, "sku_id": sku, "hostname": "web-2"}),
        ),
        product(
            "webhook",
            "/v1/webhooks",
            &owner,
            json!({"org_id": org, "url": "https://hooks.example.com/in"}),
        ),
        product(
            "webhook by key",
            "/v1/webhooks",
            &key,
            json!({"org_id": org, "url": "https://hooks.example.com/in"}),
        ),
        write(
            "project by key",
            "POST",
            projects.clone(),
            &key,
            Some(json!({"name": "P"})),
        ),
    ];
    for w in &writes {
        let r = send(&s, w).await;
        assert_eq!(
            (r.status, r.error()),
            (403, SUSPENDED),
            "{}: {:?}",
            w.what,
            r.body
        );
    }

    // Reads go on as before, and say it.
    let detail = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert_eq!(
        (detail.status, &detail.body["status"]),
        (200, &json!("suspended"))
    );
    for p in [
        format!("/v1/organizations/{org}/members"),
        projects.clone(),
        format!("/v1/organizations/{org}/wallet"),
    ] {
        assert_eq!(s.get(&p, Some(&owner)).await.status, 200, "{p}");
    }
    let servers = s
        .call(
            "GET",
            &format!("{}/v1/servers?org_id={org}", s.product()),
            Some(&key),
            None,
            &[],
        )
        .await;
    assert_eq!(servers.status, 200);
    let me = s.get("/v1/auth/me", Some(&owner)).await;
    let ms = me.array("memberships");
    let status_of = |id: &str| {
        ms.iter()
            .find(|m| m["org_id"] == id)
            .map(|m| m["status"].clone())
    };
    assert_eq!(status_of(&org), Some(json!("suspended")));
    assert_eq!(
        status_of(&other),
        Some(Value::Null),
        "an active membership is the spec's {{org_id, role}}"
    );
    // The same owner's other organization, and staff, write as before.
    let r = s
        .post(
            &format!("/v1/organizations/{other}/projects"),
            Some(&owner),
            json!({"name": "P"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(s.grant(&staff, &org, 10).await.status, 200);

    // Reactivated: writes work again (after the same positive marker).
    let back = format!("/v1/admin/organizations/{org}/reactivate");
    assert_eq!(s.post(&back, Some(&owner), json!({})).await.status, 403);
    let r = s.post(&back, Some(&staff), json!({})).await;
    assert_eq!(
        (r.status, &r.body["status"], &r.body["status_reason"]),
        (200, &json!("active"), &Value::Null)
    );
    assert_eq!(s.post(&back, Some(&staff), json!({})).await.status, 409);
    let created = eventually(Duration::from_secs(10), || async {
        let r = s.post(&projects, Some(&key), json!({"name": "Back"})).await;
        (r.status == 201).then_some(r)
    })
    .await;
    assert!(created.is_some(), "writes work again after reactivation");
    let ok = s.post("/v1/agent", Some(&owner), asked).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let joined = s.post("/v1/invites/accept", Some(&joiner), accept).await;
    assert_eq!(joined.status, 200, "the invite waited: {:?}", joined.body);
    let detail = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert_eq!(detail.body["status"], "active");

    // Audited, by staff.
    let subject = format!("org:{org}");
    let actions = eventually(Duration::from_secs(10), || async {
        let rows: Vec<String> = sqlx::query_scalar!(
            r#"SELECT action AS "v!" FROM identity.audit_log
                WHERE subject = $1 AND action IN ('org.suspended', 'org.reactivated') ORDER BY id"#,
            subject,
        )
        .fetch_all(&s.db)
        .await
        .expect("the query");
        (rows.len() == 2).then_some(rows)
    })
    .await;
    assert_eq!(
        actions,
        Some(vec![
            "org.suspended".to_owned(),
            "org.reactivated".to_owned()
        ])
    );
}

#[tokio::test]
async fn a_late_status_event_never_undoes_a_newer_change() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("late-event@example.com").await;
    let org_id: OrgId = org.parse().expect("an org id");
    let suspend = format!("/v1/admin/organizations/{org}/suspend");
    let reactivate = format!("/v1/admin/organizations/{org}/reactivate");
    assert_eq!(
        s.post(&suspend, Some(&staff), json!({"reason": "r"}))
            .await
            .status,
        200
    );
    assert_eq!(
        s.post(&reactivate, Some(&staff), json!({})).await.status,
        200
    );
    let projects = format!("/v1/organizations/{org}/projects");
    let marker = eventually(Duration::from_secs(10), || async {
        let me = s.get("/v1/auth/me", Some(&owner)).await;
        let n: i64 = sqlx::query_scalar!(
            r#"SELECT version AS "v!" FROM identity.org_states WHERE org_id = $1"#,
            org_id.as_uuid(),
        )
        .fetch_optional(&s.db)
        .await
        .expect("the query")
        .unwrap_or(0);
        (n == 2 && me.body["memberships"][0].get("status").is_none()).then_some(())
    })
    .await;
    assert!(marker.is_some(), "identity applied both changes");
    // The suspension again, late (version 1), then a duplicate of the newest:
    // neither changes anything.
    for (status, version) in [(OrgStatus::Suspended, 1), (OrgStatus::Active, 2)] {
        s.publish(OrgStatusChanged {
            org_id,
            status,
            version,
        })
        .await;
        s.consumer_caught_up("CORE", "identity-org-status").await;
        let r = s
            .post(&projects, Some(&owner), json!({"name": "Still writable"}))
            .await;
        assert_eq!(r.status, 201, "after version {version}: {:?}", r.body);
    }
    // A newer change does apply.
    s.publish(OrgStatusChanged {
        org_id,
        status: OrgStatus::Suspended,
        version: 3,
    })
    .await;
    let refused = eventually(Duration::from_secs(10), || async {
        let r = s.post(&projects, Some(&owner), json!({"name": "x"})).await;
        (r.status == 403).then_some(r)
    })
    .await;
    assert_eq!(
        refused.map(|r| r.error().to_owned()).as_deref(),
        Some(SUSPENDED)
    );
}

/// Staff suspend `org`: 200.
async fn suspend(s: &TestStack, staff: &str, org: &str) {
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/suspend"),
            Some(staff),
            json!({"reason": "a leaked key"}),
        )
        .await;
    assert_eq!(r.status, 200, "suspend: {:?}", r.body);
}

/// `who`'s user id (`GET /v1/auth/me`).
async fn user_id(s: &TestStack, who: &str) -> String {
    str_of(&s.get("/v1/auth/me", Some(who)).await.body, "user_id")
}

/// A pending invite of `org` (by its admin `admin`); returns its id.
async fn invite(s: &TestStack, admin: &str, org: &str, email: &str) -> String {
    let r = s
        .post(
            &format!("/v1/organizations/{org}/invites"),
            Some(admin),
            json!({"email": email, "role": "developer"}),
        )
        .await;
    assert_eq!(r.status, 201, "invite: {:?}", r.body);
    str_of(&r.body, "id")
}

#[tokio::test]
async fn writes_are_refused_as_soon_as_the_suspension_answers() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("at-once@example.com").await;
    let key = s.create_key(&owner, &org, Some("manager")).await;
    let key = str_of(&key.body, "token");
    // Both write before, so the gateway holds both identities (active).
    let projects = format!("/v1/organizations/{org}/projects");
    for who in [&owner, &key] {
        let r = s
            .post(&projects, Some(who), json!({"name": "Before"}))
            .await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    suspend(&s, &staff, &org).await;
    // No wait: the very next writes are refused, in org-billing and in identity.
    for (what, who) in [("project", &owner), ("project by key", &key)] {
        let r = s.post(&projects, Some(who), json!({"name": "After"})).await;
        assert_eq!(
            (r.status, r.error()),
            (403, SUSPENDED),
            "{what}: {:?}",
            r.body
        );
    }
    let r = s.create_key(&owner, &org, None).await;
    assert_eq!(
        (r.status, r.error()),
        (403, SUSPENDED),
        "api key: {:?}",
        r.body
    );
    let r = s
        .add_member(&owner, &org, "late@example.com", "visitor")
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, SUSPENDED),
        "member: {:?}",
        r.body
    );
    let listed = s.get(&projects, Some(&owner)).await;
    assert_eq!(
        listed.body.as_array().map(Vec::len),
        Some(2),
        "only the two made before: {:?}",
        listed.body
    );
}

#[tokio::test]
async fn a_suspended_organization_still_takes_access_away() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("contain@example.com").await;
    let manager = s.member(&owner, &org, "manager").await;
    let manager_id = user_id(&s, &manager).await;
    let visitor = s.member(&owner, &org, "visitor").await;
    let visitor_id = user_id(&s, &visitor).await;
    let key = s.create_key(&owner, &org, Some("developer")).await;
    let (key_id, key) = (str_of(&key.body["key"], "id"), str_of(&key.body, "token"));
    let invite_id = invite(&s, &owner, &org, "pending@example.com").await;
    // A second session of the owner (the leaked laptop's).
    let laptop = s.sign_in("contain@example.com").await;
    let sessions = s.get("/v1/auth/sessions", Some(&owner)).await;
    let laptop_session = sessions
        .body
        .as_array()
        .and_then(|l| l.iter().find(|x| x["current"] == false))
        .map(|x| str_of(x, "id"))
        .expect("the second session is listed");
    suspend(&s, &staff, &org).await;

    // What gives access is refused...
    let r = s.create_key(&owner, &org, None).await;
    assert_eq!(
        (r.status, r.error()),
        (403, SUSPENDED),
        "api key: {:?}",
        r.body
    );
    let r = s
        .post(
            &format!("/v1/organizations/{org}/invites"),
            Some(&owner),
            json!({"email": "more@example.com", "role": "visitor"}),
        )
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, SUSPENDED),
        "invite: {:?}",
        r.body
    );

    // ...what takes it away goes on.
    let r = s
        .delete(
            &format!("/v1/organizations/{org}/api-keys/{key_id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(r.status, 200, "key revocation: {:?}", r.body);
    let r = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&key))
        .await;
    assert_eq!(r.status, 401, "the revoked key is dead: {:?}", r.body);
    let r = s
        .delete(
            &format!("/v1/organizations/{org}/members/{manager_id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(r.status, 200, "member removal: {:?}", r.body);
    let r = s
        .delete(
            &format!("/v1/organizations/{org}/members/{visitor_id}"),
            Some(&visitor),
        )
        .await;
    assert_eq!(r.status, 200, "leaving: {:?}", r.body);
    let r = s
        .delete(
            &format!("/v1/organizations/{org}/invites/{invite_id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["status"]),
        (200, &json!("revoked")),
        "invite revocation: {:?}",
        r.body
    );
    let r = s
        .delete(&format!("/v1/auth/sessions/{laptop_session}"), Some(&owner))
        .await;
    assert_eq!(r.status, 200, "session revocation: {:?}", r.body);
    assert_eq!(s.get("/v1/auth/me", Some(&laptop)).await.status, 401);

    // Only the owner is left; nobody else reads the organization.
    let members = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&owner))
        .await;
    let ids: Vec<String> = members
        .array("")
        .iter()
        .map(|m| str_of(m, "user_id"))
        .collect();
    assert_eq!(ids, vec![user_id(&s, &owner).await], "{:?}", members.body);
    for gone in [&manager, &visitor] {
        let r = s
            .get(&format!("/v1/organizations/{org}/members"), Some(gone))
            .await;
        assert_eq!(r.status, 404, "{:?}", r.body);
    }
}

#[tokio::test]
async fn staff_take_access_away_in_any_organization_audited_as_staff() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let outsider = s.sign_in("outsider@example.com").await;
    let (owner, org) = s.org_with_owner("staff-contain@example.com").await;
    let developer = s.member(&owner, &org, "developer").await;
    let developer_id = user_id(&s, &developer).await;
    let key = s.create_key(&owner, &org, Some("developer")).await;
    let (key_id, key) = (str_of(&key.body["key"], "id"), str_of(&key.body, "token"));
    let invite_id = invite(&s, &owner, &org, "invited@example.com").await;
    // The owner revokes one themselves (their audit is not marked).
    let own = invite(&s, &owner, &org, "withdrawn@example.com").await;
    let r = s
        .delete(
            &format!("/v1/organizations/{org}/invites/{own}"),
            Some(&owner),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let key_path = format!("/v1/organizations/{org}/api-keys/{key_id}");
    let member_path = format!("/v1/organizations/{org}/members/{developer_id}");
    let invite_path = format!("/v1/organizations/{org}/invites/{invite_id}");

    // Someone neither a member nor staff learns nothing.
    for p in [&key_path, &member_path, &invite_path] {
        assert_eq!(s.delete(p, Some(&outsider)).await.status, 404, "{p}");
    }
    // Staff revoke a key of an active organization...
    let r = s.delete(&key_path, Some(&staff)).await;
    assert_eq!(r.status, 200, "key: {:?}", r.body);
    let r = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&key))
        .await;
    assert_eq!(r.status, 401, "the revoked key is dead: {:?}", r.body);
    // ...and remove a member and revoke an invite of a suspended one.
    suspend(&s, &staff, &org).await;
    let r = s.delete(&member_path, Some(&staff)).await;
    assert_eq!(r.status, 200, "member: {:?}", r.body);
    let r = s.delete(&invite_path, Some(&staff)).await;
    assert_eq!(
        (r.status, &r.body["status"]),
        (200, &json!("revoked")),
        "{:?}",
        r.body
    );
    let r = s
        .get(
            &format!("/v1/organizations/{org}/members"),
            Some(&developer),
        )
        .await;
    assert_eq!(r.status, 404, "the removed member is out: {:?}", r.body);

    // 404 only for what does not exist (or no longer does).
    let unknown = uuid::Uuid::new_v4();
    for p in [
        key_path.clone(),
        member_path.clone(),
        format!("/v1/organizations/{org}/api-keys/{unknown}"),
        format!("/v1/organizations/{org}/members/{unknown}"),
        format!("/v1/organizations/{org}/invites/{unknown}"),
        format!("/v1/organizations/{unknown}/api-keys/{key_id}"),
    ] {
        assert_eq!(s.delete(&p, Some(&staff)).await.status, 404, "{p}");
    }
    // Staff take access away; they do not give it (not a member: 404).
    let r = s.create_key(&staff, &org, None).await;
    assert_eq!(r.status, 404, "{:?}", r.body);

    // Audited, in the organization's history, as staff.
    let log = s.get("/v1/audit/me", Some(&staff)).await;
    let subject = format!("org:{org}");
    let by_staff: Vec<(String, Value)> = log
        .array("")
        .iter()
        .filter(|e| e["subject"] == subject.as_str() && e["action"] != "org.suspended")
        .map(|e| (str_of(e, "action"), e["detail"]["by_staff"].clone()))
        .collect();
    let t = json!(true);
    assert_eq!(
        by_staff,
        vec![
            ("org.invite_revoked".to_owned(), t.clone()),
            ("org.member_removed".to_owned(), t.clone()),
            ("org.api_key_revoked".to_owned(), t),
        ],
        "{:?}",
        log.body
    );
    let log = s.get("/v1/audit/me", Some(&owner)).await;
    let own = log.body.as_array().and_then(|l| {
        l.iter()
            .find(|e| e["action"] == "org.invite_revoked" && e["subject"] == subject.as_str())
    });
    assert_eq!(
        own.map(|e| e["detail"].get("by_staff").is_none()),
        Some(true),
        "{:?}",
        log.body
    );
}

#[tokio::test]
async fn a_suspension_identity_does_not_confirm_is_a_503_and_the_event_still_applies_it() {
    // org-billing cannot reach identity: no fast path, only the events.
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml: "[identity]\nurl = \"http://127.0.0.1:9\"\n".into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("unconfirmed@example.com").await;
    let org = s.create_org(&owner, "Unconfirmed", "TR").await;
    let org = str_of(&org.body, "id");
    let owned = eventually(Duration::from_secs(10), || async {
        let me = s.get("/v1/auth/me", Some(&owner)).await;
        (me.body["memberships"][0]["org_id"] == org.as_str()).then_some(())
    })
    .await;
    assert!(owned.is_some(), "the event made the creator owner");
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/suspend"),
            Some(&staff),
            json!({"reason": "r"}),
        )
        .await;
    assert_eq!(
        r.status, 503,
        "not a 200 identity never confirmed: {:?}",
        r.body
    );
    assert!(
        r.error().contains("identity did not confirm"),
        "{:?}",
        r.body
    );
    // org-billing's own writes stop at once (its table says so)...
    let r = s
        .post(
            &format!("/v1/organizations/{org}/projects"),
            Some(&owner),
            json!({"name": "P"}),
        )
        .await;
    assert_eq!((r.status, r.error()), (403, SUSPENDED), "{:?}", r.body);
    // ...and identity's once the event arrives (the change was kept).
    let refused = eventually(Duration::from_secs(10), || async {
        let r = s.create_key(&owner, &org, None).await;
        (r.status == 403).then_some(r)
    })
    .await;
    assert_eq!(
        refused.map(|r| r.error().to_owned()).as_deref(),
        Some(SUSPENDED)
    );
}
