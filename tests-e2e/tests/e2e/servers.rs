//! The product API on the product host: ordering on both fulfilment paths,
//! the provider's failure path, roles and keys, power, termination and usage,
//! pages, product events, and a restart mid-provisioning.

use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, Resp, StackOptions, TestStack};

pub async fn p_call(
    s: &TestStack,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Resp {
    s.call(method, &format!("{}{path}", s.product()), token, body, &[])
        .await
}

pub async fn order(s: &TestStack, token: &str, org: &str, sku: &str, hostname: &str) -> Resp {
    p_call(
        s,
        "POST",
        "/v1/servers",
        Some(token),
        Some(json!({"org_id": org, "sku_id": sku, "hostname": hostname})),
    )
    .await
}

/// `GET /v1/servers?org_id=` on the product host, as `token`.
pub async fn list_of(s: &TestStack, token: &str, org: &str) -> Resp {
    p_call(
        s,
        "GET",
        &format!("/v1/servers?org_id={org}"),
        Some(token),
        None,
    )
    .await
}

pub async fn wait_for(s: &TestStack, token: &str, id: &str, status: &str) -> Value {
    let path = format!("/v1/servers/{id}");
    eventually(Duration::from_secs(10), || async {
        let r = p_call(s, "GET", &path, Some(token), None).await;
        (r.body["status"] == status).then_some(r.body)
    })
    .await
    .unwrap_or_else(|| panic!("server {id} never became {status}"))
}

pub fn sid(r: &Resp) -> String {
    r.text("id").to_owned()
}

/// An active API-backed server of a new organization: (owner, org, server id).
pub async fn active_server(s: &TestStack, email: &str, hostname: &str) -> (String, String, String) {
    let (owner, org) = s.org_with_owner(email).await;
    let r = order(s, &owner, &org, "vps-small", hostname).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = sid(&r);
    wait_for(s, &owner, &id, "active").await;
    (owner, org, id)
}

/// Every product event on this stack's PRODUCT stream.
pub async fn product_events(s: &TestStack) -> Vec<Value> {
    let js = async_nats::jetstream::new(s.nats.clone());
    let mut stream = js
        .get_stream(s.naming.stream("PRODUCT"))
        .await
        .expect("stream");
    let state = stream.info().await.expect("info").state.clone();
    let mut out = Vec::new();
    if state.messages == 0 {
        return out;
    }
    for seq in state.first_sequence..=state.last_sequence {
        if let Ok(m) = stream.get_raw_message(seq).await {
            out.push(serde_json::from_slice(&m.payload).expect("event json"));
        }
    }
    out
}

#[tokio::test]
async fn the_catalog_is_public_with_badges_prices_and_slas() {
    let s = TestStack::spawn().await;
    let r = p_call(&s, "GET", "/v1/skus", None, None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let skus = r.array("");
    let api = skus
        .iter()
        .find(|k| k["fulfilment"] == "api")
        .expect("an API SKU");
    let manual = skus
        .iter()
        .find(|k| k["fulfilment"] == "manual")
        .expect("a manual SKU");
    assert!(api["sla_hours"].is_null());
    assert_eq!(manual["sla_hours"], 48);
    for k in [api, manual] {
        assert!(k["badges"].as_array().is_some_and(|b| !b.is_empty()));
        assert!(k["monthly_price_minor"].as_i64().is_some_and(|p| p > 0));
        assert!(k["currency"].is_string() && k["name"].is_string());
    }
    assert_eq!(p_call(&s, "GET", "/v1/skus", None, None).await.status, 200);
    // Not on the core host.
    assert_eq!(s.get("/v1/skus", None).await.status, 404);
}

#[tokio::test]
async fn an_api_backed_server_becomes_active_with_sealed_credentials() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("api-order@example.com").await;
    let r = order(&s, &owner, &org, "vps-small", "Web-01").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (r.body["status"].as_str(), r.body["hostname"].as_str()),
        (Some("provisioning"), Some("web-01"))
    );
    assert_eq!(r.body["org_id"], json!(org));
    let id = sid(&r);
    let d = wait_for(&s, &owner, &id, "active").await;
    let creds = &d["credentials"];
    assert_eq!(creds["username"], "root");
    assert_eq!(creds["host"], "web-01.sandbox.example.net");
    let password = creds.text("password").to_owned();
    assert!(password.len() >= 32);
    assert!(d["activated_at"].is_string());
    // Lists never carry credentials; the table holds ciphertext only.
    let list = list_of(&s, &owner, &org).await;
    assert!(list.body[0].get("credentials").is_none(), "{:?}", list.body);
    let dump: String = sqlx::query_scalar!(
        r#"SELECT string_agg(row_to_json(x)::text, ' ') AS "v!" FROM server_product.servers x"#,
    )
    .fetch_one(&s.db)
    .await
    .expect("dump");
    assert!(!dump.contains(&password));
    // The sealed column is bytea (JSON renders it as hex, which never holds
    // the password): its raw bytes are what must not.
    let sealed: Option<Vec<u8>> = sqlx::query_scalar!(
        "SELECT credentials FROM server_product.servers WHERE id = $1::uuid",
        uuid::Uuid::parse_str(&id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("credentials");
    let sealed = sealed.expect("credentials are stored");
    assert!(
        !sealed
            .windows(password.len())
            .any(|w| w == password.as_bytes()),
        "the password is stored in clear"
    );
    // Reading credentials is audited.
    let audited = eventually(Duration::from_secs(10), || async {
        let a = s.get("/v1/audit/me", Some(&owner)).await;
        a.body
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["action"] == "server.credentials_read")
            .then_some(())
    })
    .await;
    assert!(audited.is_some());
}

#[tokio::test]
async fn a_manual_server_waits_in_the_staff_queue_within_its_sla() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("manual-order@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let r = order(&s, &owner, &org, "dedicated-gpu", "gpu-1").await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (201, Some("pending_fulfilment"))
    );
    let id = sid(&r);
    let created = time::OffsetDateTime::parse(
        r.text("created_at"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("created");
    let due = time::OffsetDateTime::parse(
        r.text("due_at"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("due");
    assert_eq!(due - created, time::Duration::hours(48));
    let q = p_call(&s, "GET", "/v1/admin/fulfilment", Some(&staff), None).await;
    assert_eq!(q.status, 200);
    assert_eq!(
        (q.body[0]["id"].as_str(), q.body[0]["overdue"].as_bool()),
        (Some(id.as_str()), Some(false))
    );
    assert_eq!(
        p_call(&s, "GET", "/v1/admin/fulfilment", Some(&owner), None)
            .await
            .status,
        403
    );
    s.clock.advance(time::Duration::hours(49));
    let q = p_call(&s, "GET", "/v1/admin/fulfilment", Some(&staff), None).await;
    assert_eq!(q.body[0]["overdue"], true);
    let creds = json!({"username": "admin", "password": "s3cret-handmade", "host": "10.0.0.7"});
    let path = format!("/v1/admin/fulfilment/{id}/complete");
    assert_eq!(
        p_call(&s, "POST", &path, Some(&owner), Some(creds.clone()))
            .await
            .status,
        403
    );
    let done = p_call(&s, "POST", &path, Some(&staff), Some(creds.clone())).await;
    assert_eq!(
        (done.status, done.body["status"].as_str()),
        (200, Some("active")),
        "{:?}",
        done.body
    );
    let again = p_call(&s, "POST", &path, Some(&staff), Some(creds)).await;
    assert_eq!(
        (again.status, again.error()),
        (409, "cannot fulfil a server that is active")
    );
    let d = p_call(&s, "GET", &format!("/v1/servers/{id}"), Some(&owner), None).await;
    assert_eq!(d.body["credentials"]["password"], "s3cret-handmade");
    assert_eq!(
        p_call(&s, "GET", "/v1/admin/fulfilment", Some(&staff), None)
            .await
            .body,
        json!([])
    );
}

#[tokio::test]
async fn a_failing_provider_fails_the_order_and_frees_the_hostname() {
    let s = TestStack::spawn_with(StackOptions {
        server_product_toml: "[provider]\nsandbox_fail = true\nmax_attempts = 2\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("fail-order@example.com").await;
    let id = sid(&order(&s, &owner, &org, "vps-small", "doomed").await);
    let d = wait_for(&s, &owner, &id, "failed").await;
    assert!(
        d["failure"]
            .as_str()
            .is_some_and(|f| f.contains("sandbox_fail")),
        "{d}"
    );
    assert!(d["credentials"].is_null());
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "doomed").await.status,
        201
    );
    let jobs: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM server_product.provision_jobs WHERE server_id = $1::uuid"#,
        uuid::Uuid::parse_str(&id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("jobs");
    assert_eq!(jobs, 0);
}

#[tokio::test]
async fn only_managers_order_keys_work_at_their_role_and_outsiders_get_404() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("roles-order@example.com").await;
    for role in ["visitor", "finance", "developer"] {
        let t = s.member(&owner, &org, role).await;
        let r = order(&s, &t, &org, "vps-small", &format!("h-{role}")).await;
        assert_eq!(r.status, 403, "{role}");
        assert!(r.error().contains("manager"), "{role}: {}", r.error());
    }
    let manager = s.member(&owner, &org, "manager").await;
    let id = sid(&order(&s, &manager, &org, "vps-small", "by-manager").await);
    // API keys on the product host, at their role.
    let key = |role: &'static str| {
        let (s, owner, org) = (&s, owner.clone(), org.clone());
        async move {
            s.create_key(&owner, &org, Some(role))
                .await
                .text("token")
                .to_owned()
        }
    };
    let mkey = key("manager").await;
    let dkey = key("developer").await;
    assert_eq!(
        order(&s, &mkey, &org, "vps-small", "by-key").await.status,
        201
    );
    assert_eq!(
        order(&s, &dkey, &org, "vps-small", "by-dev-key")
            .await
            .status,
        403
    );
    let list = list_of(&s, &dkey, &org).await;
    assert_eq!(
        (list.status, list.body.as_array().map(Vec::len)),
        (200, Some(2))
    );
    // Another organization's server: 404 for every read and action.
    let outsider = s.sign_in("outsider-order@example.com").await;
    for (m, p, b) in [
        ("GET", format!("/v1/servers/{id}"), None),
        (
            "POST",
            format!("/v1/servers/{id}/power"),
            Some(json!({"action": "reboot"})),
        ),
        ("POST", format!("/v1/servers/{id}/terminate"), None),
        ("GET", format!("/v1/servers?org_id={org}"), None),
        (
            "POST",
            format!("/v1/service-contract/services/{id}/suspend"),
            None,
        ),
    ] {
        let r = p_call(&s, m, &p, Some(&outsider), b).await;
        assert_eq!((r.status, r.error()), (404, "not found"), "{m} {p}");
    }
    assert_eq!(
        order(&s, &outsider, &org, "vps-small", "intruder")
            .await
            .status,
        404
    );
    let r = p_call(
        &s,
        "GET",
        &format!("/v1/servers/{}", uuid::Uuid::new_v4()),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn power_actions_follow_the_lifecycle_and_terminate_ends_usage() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "power@example.com", "pw-1").await;
    let power = |action: &'static str| {
        let (s, owner, path) = (&s, owner.clone(), format!("/v1/servers/{id}/power"));
        async move {
            p_call(
                s,
                "POST",
                &path,
                Some(&owner),
                Some(json!({"action": action})),
            )
            .await
        }
    };
    assert_eq!(power("reboot").await.body["status"], "active");
    let r = power("start").await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot start a server that is active")
    );
    assert_eq!(power("stop").await.body["status"], "stopped");
    let r = power("reboot").await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot reboot a server that is stopped")
    );
    assert_eq!(power("stop").await.status, 409);
    assert_eq!(power("start").await.body["status"], "active");
    let r = power("explode").await;
    assert_eq!(
        (r.status, r.error()),
        (400, "action must be reboot, stop or start")
    );
    // Still provisioning: nothing to power.
    let fresh = sid(&order(&s, &owner, &org, "vps-small", "pw-2").await);
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{fresh}/power"),
        Some(&owner),
        Some(json!({"action": "stop"})),
    )
    .await;
    assert_eq!(
        (r.status, r.error()),
        (409, "cannot stop a server that is provisioning")
    );
    // Terminate: usage ends in the same change.
    let usage = p_call(
        &s,
        "GET",
        &format!("/v1/service-contract/usage?org_id={org}"),
        Some(&owner),
        None,
    )
    .await;
    let mine = usage
        .body
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["service_id"] == json!(id))
        .cloned()
        .expect("usage");
    assert!(mine["periods"][0]["ended_at"].is_null());
    let t = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{id}/terminate"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(
        (t.status, t.body["status"].as_str()),
        (200, Some("terminated"))
    );
    let ended: (Option<time::OffsetDateTime>, Option<time::OffsetDateTime>) = sqlx::query!(
        r#"SELECT (SELECT ended_at FROM server_product.usage_periods WHERE server_id = s.id) AS "c0?", s.terminated_at AS "c1?"  FROM server_product.servers s WHERE s.id = $1::uuid"#,
        uuid::Uuid::parse_str(&id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .expect("usage");
    assert!(ended.0.is_some() && ended.0 == ended.1, "{ended:?}");
    assert_eq!(power("start").await.status, 409);
    let again = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{id}/terminate"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(
        (again.status, again.error()),
        (409, "cannot terminate a server that is terminated")
    );
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "pw-1").await.status,
        201,
        "the hostname is free again"
    );
}

#[tokio::test]
async fn hostnames_are_labels_unique_per_organization_and_bad_input_is_a_json_4xx() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("input-order@example.com").await;
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "dup").await.status,
        201
    );
    let r = order(&s, &owner, &org, "vps-small", "DUP").await;
    assert_eq!(
        (r.status, r.error()),
        (
            409,
            "hostname dup is already used by a server of this organization"
        )
    );
    let (other_owner, other) = s.org_with_owner("input-other@example.com").await;
    assert_eq!(
        order(&s, &other_owner, &other, "vps-small", "dup")
            .await
            .status,
        201
    );
    for (body, status) in [
        (
            json!({"org_id": org, "sku_id": "vps-small", "hostname": "no_underscores"}),
            400,
        ),
        (
            json!({"org_id": org, "sku_id": "vps-small", "hostname": "-x"}),
            400,
        ),
        (
            json!({"org_id": org, "sku_id": "nope", "hostname": "ok"}),
            400,
        ),
        (json!({"org_id": org, "sku_id": "vps-small"}), 400),
        (
            json!({"org_id": "not-a-uuid", "sku_id": "vps-small", "hostname": "ok"}),
            400,
        ),
        (json!({"org_id": org, "sku_id": 5, "hostname": "ok"}), 400),
        (
            json!({"org_id": org, "sku_id": "vps-small", "hostname": "ok", "x": 1}),
            400,
        ),
    ] {
        let r = p_call(&s, "POST", "/v1/servers", Some(&owner), Some(body.clone())).await;
        assert_eq!(r.status, status, "{body}: {:?}", r.body);
        assert!(r.body["error"].is_string(), "{body}");
    }
    let raw = s
        .http
        .post(format!("{}/v1/servers", s.product()))
        .bearer_auth(&owner)
        .header("content-type", "application/json")
        .body("{\"org_id\":")
        .send()
        .await
        .expect("send");
    assert_eq!(raw.status().as_u16(), 400);
    let big = s
        .http
        .post(format!("{}/v1/servers", s.product()))
        .bearer_auth(&owner)
        .header("content-type", "application/json")
        .body(format!("{{\"x\":\"{}\"}}", "a".repeat(80_000)))
        .send()
        .await
        .expect("send");
    assert_eq!(big.status().as_u16(), 413);
    for path in [
        "/v1/servers/not-a-uuid",
        "/v1/servers?org_id=zzz",
        &format!("/v1/servers?org_id={org}&cursor=%%%"),
        &format!("/v1/servers?org_id={org}&limit=0"),
    ] {
        let r = p_call(&s, "GET", path, Some(&owner), None).await;
        assert_eq!(r.status, 400, "{path}: {:?}", r.body);
        assert!(r.body["error"].is_string());
    }
}

#[tokio::test]
async fn server_lists_come_in_cursor_pages() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("pages@example.com").await;
    for i in 0..5 {
        assert_eq!(
            order(&s, &owner, &org, "dedicated-gpu", &format!("p{i}"))
                .await
                .status,
            201
        );
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/servers?org_id={org}&limit=2&cursor={c}"),
            None => format!("/v1/servers?org_id={org}&limit=2"),
        };
        let r = p_call(&s, "GET", &path, Some(&owner), None).await;
        assert_eq!(r.status, 200);
        let items = r.array("");
        pages.push(items.len());
        seen.extend(items.iter().map(|i| i.text("hostname").to_owned()));
        cursor = r
            .headers
            .get("x-next-cursor")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(pages, [2, 2, 1]);
    assert_eq!(
        seen,
        ["p4", "p3", "p2", "p1", "p0"],
        "newest first, each once"
    );
}

#[tokio::test]
async fn each_change_emits_one_product_event_and_a_failed_one_none() {
    let s = TestStack::spawn().await;
    let (owner, org, id) = active_server(&s, "events@example.com", "ev-1").await;
    // A refused change (duplicate hostname, wrong state) emits nothing.
    assert_eq!(
        order(&s, &owner, &org, "vps-small", "ev-1").await.status,
        409
    );
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{id}/power"),
        Some(&owner),
        Some(json!({"action": "start"})),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        p_call(
            &s,
            "POST",
            &format!("/v1/servers/{id}/terminate"),
            Some(&owner),
            None
        )
        .await
        .status,
        200
    );
    // Three events out, and the outbox empty: every event committed so far
    // (a refused change's included, had it written one) has been published.
    // (The termination's usage.recorded, billing data, is usage_charges.rs's.)
    let events = eventually(Duration::from_secs(10), || async {
        let e: Vec<Value> = product_events(&s)
            .await
            .into_iter()
            .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("server.")))
            .collect();
        let pending: i64 =
            sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM server_product.outbox"#,)
                .fetch_one(&s.db)
                .await
                .unwrap_or(-1);
        (e.len() >= 3 && pending == 0).then_some(e)
    })
    .await
    .expect("three events, nothing left in the outbox");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["server.created", "server.active", "server.terminated"]
    );
    let mut ids: Vec<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    for e in &events {
        assert_eq!(e["org_id"], json!(org));
        assert_eq!(e["data"]["id"], json!(id));
        assert!(e["created_at"].is_string());
        assert!(e["data"].get("credentials").is_none());
    }
    assert_eq!(events[1]["data"]["status"], "active");
}

#[tokio::test]
async fn a_restart_mid_provisioning_finishes_the_order() {
    // The stack's server-product provisions nothing (its worker is off), as if
    // it stopped right after taking the order.
    let s = TestStack::spawn_with(StackOptions {
        server_product_toml: "[provider]\nworker = false\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("restart@example.com").await;
    let id = sid(&order(&s, &owner, &org, "vps-small", "survivor").await);
    // Taken and left as a stopped service leaves it: its provisioning job
    // stored, never attempted.
    let job = sqlx::query!(
        r#"SELECT j.attempts, s.status FROM server_product.provision_jobs j
             JOIN server_product.servers s ON s.id = j.server_id WHERE j.server_id = $1::uuid"#,
        uuid::Uuid::parse_str(&id).expect("a server id"),
    )
    .fetch_one(&s.db)
    .await
    .expect("the order's provisioning job");
    assert_eq!((job.attempts, job.status.as_str()), (0, "provisioning"));
    // The restarted service (a new process on the same database) finishes it.
    let cancel = tokio_util::sync::CancellationToken::new();
    let app = server_product::build(
        s.settings::<server_product::ServerProduct>(""),
        service_kit::Runtime::new(cancel.clone()),
    )
    .await
    .expect("restart");
    tokio::spawn(app.run_until_stopped());
    let d = wait_for(&s, &owner, &id, "active").await;
    assert_eq!(d["credentials"]["username"], "root");
    cancel.cancel();
}

#[tokio::test]
async fn concurrent_orders_each_take_their_hostname_once_and_all_become_active() {
    // Orders are stored by group commit (server-product's orders writers):
    // concurrent orders share transactions. Each must still be its own: one
    // 201 per hostname, the others 409 with nothing of them stored, and each
    // stored order one server, one server.created and (API) one server.active.
    // 24 orders at once: past the default order burst (20) of the rate limit.
    let s = TestStack::spawn_with(StackOptions {
        server_product_toml: "[orders]\nburst = 30\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("concurrent-orders@example.com").await;
    let hostnames: Vec<String> = (0..24).map(|i| format!("batch-{}", i % 8)).collect();
    let answers = futures::future::join_all(hostnames.iter().map(|h| {
        let (s, owner, org) = (&s, owner.clone(), org.clone());
        async move { (h.clone(), order(s, &owner, &org, "vps-small", h).await) }
    }))
    .await;
    let mut created = std::collections::BTreeMap::new();
    for (h, r) in &answers {
        match r.status {
            201 => {
                assert!(
                    created.insert(h.clone(), r.body.clone()).is_none(),
                    "{h} twice"
                );
            }
            409 => assert_eq!(
                r.error(),
                format!("hostname {h} is already used by a server of this organization")
            ),
            other => panic!("{h}: {other} {:?}", r.body),
        }
    }
    assert_eq!(created.len(), 8, "one 201 per hostname: {created:?}");
    // What the 201 said is what was stored (what provisioning does not change).
    for body in created.values() {
        let d = p_call(
            &s,
            "GET",
            &format!("/v1/servers/{}", body.text("id")),
            Some(&owner),
            None,
        )
        .await;
        for field in [
            "id",
            "org_id",
            "sku_id",
            "hostname",
            "fulfilment",
            "due_at",
            "created_at",
        ] {
            assert_eq!(d.body[field], body[field], "{field}: {:?}", d.body);
        }
    }
    let stored: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM server_product.servers WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(stored, 8);
    for body in created.values() {
        wait_for(&s, &owner, body.text("id"), "active").await;
    }
    let events = eventually(Duration::from_secs(10), || async {
        let e: Vec<Value> = product_events(&s)
            .await
            .into_iter()
            .filter(|e| e["org_id"] == json!(org))
            .collect();
        (e.len() >= 16).then_some(e)
    })
    .await
    .expect("two events per server");
    for body in created.values() {
        let of: Vec<&Value> = events
            .iter()
            .filter(|e| e["data"]["id"] == body["id"])
            .collect();
        let kinds: Vec<&str> = of.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(kinds, ["server.created", "server.active"], "{body}");
        // The event carries the server as the 201 showed it.
        assert_eq!(&of[0]["data"], body);
    }
    assert_eq!(events.len(), 16, "{events:#?}");
}
