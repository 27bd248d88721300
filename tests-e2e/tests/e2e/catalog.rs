//! The declared catalog (issue 17, "first run in production"): a stack
//! started without the dev seed has no distributors and no SKUs; a catalog
//! file applied through each service's `migrate` (what the Helm migration Job
//! runs) opens it for business, idempotently, all or nothing. And staff's SKU
//! endpoints: create, change, retire.

use crate::servers::{order, p_call, sid, wait_for};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, StackOptions, TestStack};

const TR_ID: &str = "0193aaaa-0000-7000-8000-000000000001";
const EU_ID: &str = "0193aaaa-0000-7000-8000-000000000002";
const EU: [&str; 27] = [
    "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV",
    "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
];

fn catalog(price: i64) -> Value {
    json!({
        "distributors": [
            {"id": TR_ID, "name": "Prod Türkiye", "country": "TR", "legal_name": "Prod Teknoloji A.Ş.",
             "currency": "TRY", "covers": ["TR"], "tax_id": "1234567890", "address": "Ankara"},
            {"id": EU_ID, "name": "Prod Europe", "country": "IE", "legal_name": "Prod Europe Ltd.",
             "currency": "EUR", "covers": EU, "profit_pct": 12.5}
        ],
        "skus": [
            {"id": "prod-vps", "name": "Prod VPS", "fulfilment": "api", "sla_hours": null,
             "badges": ["nvme"], "monthly_price_minor": price, "currency": "TRY", "position": 1,
             "listed": true},
            {"id": "prod-gpu", "name": "Prod GPU", "fulfilment": "manual", "sla_hours": 24,
             "monthly_price_minor": 990000, "currency": "TRY", "position": 2},
            {"id": "prod-vps-eu", "name": "Prod VPS EU", "fulfilment": "api",
             "monthly_price_minor": 1500, "currency": "EUR", "position": 3}
        ]
    })
}

/// Write `catalog` to a file of its own; returns its path.
fn write(catalog: &Value) -> String {
    let dir = std::env::temp_dir().join(format!("hub-catalog-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("catalog.json");
    std::fs::write(&path, catalog.to_string()).expect("write catalog");
    path.to_string_lossy().into_owned()
}

/// Run both services' `migrate` with `catalog.file = path`, as the Helm
/// migration Jobs do.
async fn migrate(s: &TestStack, path: &str) -> anyhow::Result<()> {
    let layer = format!("[catalog]\nfile = {path:?}\n");
    org_billing::migrate(&s.settings::<org_billing::OrgBilling>(&layer)).await?;
    server_product::migrate(&s.settings::<server_product::ServerProduct>(&layer)).await?;
    Ok(())
}

/// Every catalog row with its row version (xmin changes when a row is
/// written), in a stable order.
async fn rows(s: &TestStack) -> Vec<String> {
    sqlx::query_scalar!(
        r#"SELECT 'd ' || id || ' ' || xmin::text || ' ' || row_to_json(d)::text AS "v!" FROM org_billing.distributors d
         UNION ALL SELECT 'c ' || country || ' ' || xmin::text || ' ' || distributor_id FROM org_billing.distributor_coverage
         UNION ALL SELECT 's ' || id || ' ' || xmin::text || ' ' || row_to_json(k)::text FROM server_product.skus k
         ORDER BY 1"#,
    )
    .fetch_all(&s.db)
    .await
    .expect("catalog rows")
}

async fn listed(s: &TestStack) -> Vec<Value> {
    let r = p_call(s, "GET", "/v1/skus", None, None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.array("")
}

fn price_of(skus: &[Value], id: &str) -> Option<i64> {
    skus.iter()
        .find(|k| k["id"] == id)
        .and_then(|k| k["monthly_price_minor"].as_i64())
}

#[tokio::test]
async fn a_declared_catalog_opens_a_fresh_production_database() {
    let s = TestStack::spawn_with(StackOptions {
        dev_seed: false,
        ..Default::default()
    })
    .await;
    let founder = s.sign_in("first-run@example.com").await;
    // Like production on its first day: nothing to route to, nothing to order.
    let r = s.create_org(&founder, "Yerli A.Ş.", "TR").await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert!(listed(&s).await.is_empty());
    assert!(rows(&s).await.is_empty());

    let path = write(&catalog(49000));
    migrate(&s, &path).await.expect("the catalog applies");
    let tr = s.create_org(&founder, "Yerli A.Ş.", "TR").await;
    assert_eq!(tr.status, 201, "{:?}", tr.body);
    assert_eq!(tr.body["distributor_entity"], "Prod Türkiye");
    assert_eq!(tr.body["distributor_entity_id"], TR_ID);
    let de = s.create_org(&founder, "Beispiel GmbH", "DE").await;
    assert_eq!(de.status, 201, "{:?}", de.body);
    assert_eq!(de.body["distributor_entity_id"], EU_ID);
    assert_eq!(s.create_org(&founder, "Elsewhere", "US").await.status, 422);
    let (tax_id, pct): (String, String) = sqlx::query!(
        r#"SELECT tax_id AS "c0!", profit_pct::text AS "c1!" FROM org_billing.distributors WHERE id = $1::uuid"#,
        uuid::Uuid::parse_str(TR_ID).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .expect("TR entity");
    assert_eq!((tax_id.as_str(), pct.as_str()), ("1234567890", "0.00"));
    let eu_pct: String = sqlx::query_scalar!(
        r#"SELECT profit_pct::text AS "v!" FROM org_billing.distributors WHERE id = $1::uuid"#,
        uuid::Uuid::parse_str(EU_ID).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("EU entity");
    assert_eq!(eu_pct, "12.50");
    let wallet = s
        .get(
            &format!("/v1/organizations/{}/wallet", de.text("id")),
            Some(&founder),
        )
        .await;
    assert_eq!(wallet.body["currency"], "EUR", "{:?}", wallet.body);

    // The catalog in file order, and an API-backed server becomes active.
    let skus = listed(&s).await;
    let ids: Vec<&str> = skus.iter().filter_map(|k| k["id"].as_str()).collect();
    assert_eq!(ids, ["prod-vps", "prod-gpu", "prod-vps-eu"]);
    let org = tr.text("id").to_owned();
    let r = order(&s, &founder, &org, "prod-vps", "web-1").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let server = sid(&r);
    wait_for(&s, &founder, &server, "active").await;

    // Applying the same file again writes no row at all.
    let before = rows(&s).await;
    assert_eq!(before.len(), 2 + 28 + 3);
    migrate(&s, &path).await.expect("applies again");
    assert_eq!(rows(&s).await, before);
    // The counts the migrate log line reports.
    let declared =
        hub_domain::catalog::Catalog::parse(catalog(49000).to_string().as_bytes()).expect("valid");
    let a = org_billing::catalog::apply(
        &s.db,
        &declared.distributors,
        org_billing::catalog::Mode::Declared,
    )
    .await
    .expect("apply");
    assert_eq!(
        (
            a.distributors.unchanged,
            a.coverage.unchanged,
            a.distributors.created + a.distributors.updated
        ),
        (2, 28, 0)
    );

    // A new price in the file, and one SKU no longer listed in it: the price
    // changes, that one row only; the unlisted SKU stays as it was.
    let mut cheaper = catalog(39000);
    cheaper["skus"]
        .as_array_mut()
        .expect("skus")
        .retain(|k| k["id"] != "prod-gpu");
    cheaper["distributors"][0]["tax_id"] = json!("1234567891");
    let cheaper_path = write(&cheaper);
    migrate(&s, &cheaper_path)
        .await
        .expect("the new price applies");
    let after = rows(&s).await;
    let changed: Vec<&String> = after.iter().filter(|r| !before.contains(r)).collect();
    assert_eq!(changed.len(), 2, "{changed:#?}");
    assert!(changed.iter().any(|r| r.starts_with("s prod-vps ")));
    assert!(changed
        .iter()
        .any(|r| r.starts_with(&format!("d {TR_ID} "))));
    let skus = listed(&s).await;
    assert_eq!(price_of(&skus, "prod-vps"), Some(39000));
    assert_eq!(price_of(&skus, "prod-gpu"), Some(990000));
    let c = server_product::catalog::apply(
        &s.db,
        &hub_domain::catalog::Catalog::parse(cheaper.to_string().as_bytes())
            .expect("valid")
            .skus,
        server_product::catalog::Mode::Declared,
    )
    .await
    .expect("apply");
    assert_eq!((c.created, c.updated, c.unchanged), (0, 0, 2));

    // A file that does not validate fails naming the entry; nothing changes.
    let mut invalid = catalog(29000);
    invalid["skus"][1]["sla_hours"] = Value::Null;
    let e = migrate(&s, &write(&invalid)).await.expect_err("refused");
    let e = format!("{e:#}");
    assert!(
        e.contains("skus[1] \"prod-gpu\": a manually fulfilled SKU needs sla_hours"),
        "{e}"
    );
    let mut typo = catalog(29000);
    typo["distributors"][1]["cover"] = json!(["DE"]);
    let e = format!(
        "{:#}",
        migrate(&s, &write(&typo)).await.expect_err("refused")
    );
    assert!(e.contains("unknown field `cover`"), "{e}");
    let mut twice = catalog(29000);
    twice["distributors"][0]["covers"] = json!(["TR", "DE"]);
    let e = format!(
        "{:#}",
        migrate(&s, &write(&twice)).await.expect_err("refused")
    );
    assert!(
        e.contains(&format!(
            "distributors[1] {EU_ID} (\"Prod Europe\"): DE is already covered by distributors[0]"
        )),
        "{e}"
    );
    assert_eq!(rows(&s).await, after);
    // One the database refuses (a SKU's currency is fixed) rolls back the
    // whole transaction: the new price listed before it is not kept either.
    // (Each service applies its part in its own transaction: the
    // distributors here are the ones applied already.)
    let mut currency = cheaper.clone();
    currency["skus"][0]["monthly_price_minor"] = json!(29000);
    currency["skus"][1]["currency"] = json!("USD");
    let e = format!(
        "{:#}",
        migrate(&s, &write(&currency)).await.expect_err("refused")
    );
    assert!(
        e.contains("sku \"prod-vps-eu\": currency is EUR and cannot become USD"),
        "{e}"
    );
    assert_eq!(rows(&s).await, after);
    assert_eq!(price_of(&listed(&s).await, "prod-vps"), Some(39000));
    // The server ordered before it all is still there and active.
    let d = p_call(
        &s,
        "GET",
        &format!("/v1/servers/{server}"),
        Some(&founder),
        None,
    )
    .await;
    assert_eq!(d.body["status"], "active");
}

#[tokio::test]
async fn the_dev_seed_inserts_only_what_is_missing() {
    let s = TestStack::spawn().await;
    // Staff retire a seeded SKU; a restart's seed does not bring it back.
    sqlx::query!(
        "UPDATE server_product.skus SET listed = false, monthly_price_minor = 1 WHERE id = 'vps-large'",
    )
        .execute(&s.db)
        .await
        .expect("update");
    let before = rows(&s).await;
    server_product::migrate(&s.settings::<server_product::ServerProduct>(""))
        .await
        .expect("migrate");
    org_billing::migrate(&s.settings::<org_billing::OrgBilling>(""))
        .await
        .expect("migrate");
    assert_eq!(rows(&s).await, before);
    assert_eq!(before.iter().filter(|r| r.starts_with("s ")).count(), 4);
    assert_eq!(before.iter().filter(|r| r.starts_with("c ")).count(), 28);
}

async fn admin(
    s: &TestStack,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> tests_e2e::Resp {
    p_call(s, method, path, Some(token), body).await
}

fn new_sku(id: &str) -> Value {
    json!({"id": id, "name": "Staff VPS", "fulfilment": "api", "badges": ["nvme", "new"],
           "monthly_price_minor": 25000, "currency": "TRY", "position": 7})
}

#[tokio::test]
async fn staff_create_change_and_retire_skus() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("sku-owner@example.com").await;

    // Staff only, whatever the body.
    for (method, path, body) in [
        ("POST", "/v1/admin/skus", Some(new_sku("staff-vps"))),
        (
            "PATCH",
            "/v1/admin/skus/vps-small",
            Some(json!({"listed": false})),
        ),
        ("GET", "/v1/admin/skus", None),
    ] {
        let r = admin(&s, method, path, &owner, body).await;
        assert_eq!(r.status, 403, "{method} {path}: {:?}", r.body);
        assert_eq!(r.error(), "staff only");
    }
    assert_eq!(
        p_call(
            &s,
            "POST",
            "/v1/admin/skus",
            None,
            Some(new_sku("staff-vps"))
        )
        .await
        .status,
        401
    );

    // Create: 201 with the SKU; the same id again is a conflict.
    let r = admin(
        &s,
        "POST",
        "/v1/admin/skus",
        &staff,
        Some(new_sku("staff-vps")),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({"id": "staff-vps", "name": "Staff VPS", "fulfilment": "api", "sla_hours": null,
               "badges": ["nvme", "new"], "monthly_price_minor": 25000, "currency": "TRY",
               "position": 7, "listed": true})
    );
    let mut again = new_sku("staff-vps");
    again["monthly_price_minor"] = json!(1);
    let r = admin(&s, "POST", "/v1/admin/skus", &staff, Some(again)).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("SKU staff-vps exists"), "{}", r.error());
    assert_eq!(price_of(&listed(&s).await, "staff-vps"), Some(25000));
    let r = admin(
        &s,
        "POST",
        "/v1/admin/skus",
        &staff,
        Some(
            json!({"id": "staff-gpu", "name": "Staff GPU", "fulfilment": "manual", "sla_hours": 72,
                    "monthly_price_minor": 500000, "currency": "EUR"}),
        ),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (r.body["position"].as_i64(), r.body["badges"].clone()),
        (Some(0), json!([]))
    );

    // Bad input: 400 naming the field; nothing created.
    for (body, says) in [
        (
            json!({"id": "Staff_VPS", "name": "x", "fulfilment": "api", "monthly_price_minor": 1, "currency": "TRY"}),
            "id must be",
        ),
        (
            json!({"id": "bad-gpu", "name": "x", "fulfilment": "manual", "monthly_price_minor": 1, "currency": "TRY"}),
            "needs sla_hours",
        ),
        (
            json!({"id": "bad-api", "name": "x", "fulfilment": "api", "sla_hours": 4, "monthly_price_minor": 1, "currency": "TRY"}),
            "sla_hours must be null",
        ),
        (
            json!({"id": "bad-price", "name": "x", "fulfilment": "api", "monthly_price_minor": -5, "currency": "TRY"}),
            "monthly_price_minor must be 0 or more",
        ),
        (
            json!({"id": "bad-cur", "name": "x", "fulfilment": "api", "monthly_price_minor": 1, "currency": "GBP"}),
            "currency must be one of",
        ),
        (
            json!({"id": "bad-name", "name": " ", "fulfilment": "api", "monthly_price_minor": 1, "currency": "TRY"}),
            "name must be",
        ),
        (
            json!({"id": "bad-field", "name": "x", "fulfilment": "api", "monthly_price_minor": 1, "currency": "TRY", "price": 1}),
            "unknown field `price`",
        ),
        (
            json!({"id": "bad-type", "name": "x", "fulfilment": "api", "monthly_price_minor": "1", "currency": "TRY"}),
            "invalid request body",
        ),
    ] {
        let r = admin(&s, "POST", "/v1/admin/skus", &staff, Some(body)).await;
        assert_eq!(r.status, 400, "{says}: {:?}", r.body);
        assert!(r.error().contains(says), "{says}: {}", r.error());
    }
    let all = admin(&s, "GET", "/v1/admin/skus", &staff, None).await;
    assert_eq!(all.status, 200);
    assert!(!all.body.as_array().is_some_and(|a| a
        .iter()
        .any(|k| k["id"].as_str().is_some_and(|i| i.starts_with("bad-")))));

    // Patch price and SLA.
    let r = admin(
        &s,
        "PATCH",
        "/v1/admin/skus/staff-gpu",
        &staff,
        Some(json!({"monthly_price_minor": 450000, "sla_hours": 24, "name": "Staff GPU v2"})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (
            r.body["monthly_price_minor"].as_i64(),
            r.body["sla_hours"].as_i64(),
            r.body["name"].as_str()
        ),
        (Some(450000), Some(24), Some("Staff GPU v2"))
    );
    let gpu = listed(&s)
        .await
        .into_iter()
        .find(|k| k["id"] == "staff-gpu")
        .expect("listed");
    assert_eq!(
        (
            gpu["monthly_price_minor"].as_i64(),
            gpu["sla_hours"].as_i64()
        ),
        (Some(450000), Some(24))
    );
    // A manual order now gets the new SLA.
    let r = order(&s, &owner, &org, "staff-gpu", "gpu-1").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["status"], "pending_fulfilment");
    let rfc = &time::format_description::well_known::Rfc3339;
    let at = |k: &str| time::OffsetDateTime::parse(r.text(k), rfc).expect(k);
    assert_eq!(at("due_at") - at("created_at"), time::Duration::hours(24));

    // Refused changes: 422 for what the SKU's nature forbids, 400 for bad
    // values, 404 for an unknown id.
    for (path, body, status, says) in [
        (
            "/v1/admin/skus/staff-gpu",
            json!({"currency": "TRY"}),
            422,
            "currency is fixed",
        ),
        (
            "/v1/admin/skus/staff-gpu",
            json!({"fulfilment": "api"}),
            422,
            "fulfilment is fixed",
        ),
        (
            "/v1/admin/skus/staff-gpu",
            json!({"sla_hours": null}),
            422,
            "needs sla_hours",
        ),
        (
            "/v1/admin/skus/staff-gpu",
            json!({"fulfilment": "robot"}),
            400,
            "fulfilment must be one of api, manual",
        ),
        (
            "/v1/admin/skus/staff-vps",
            json!({"sla_hours": 8}),
            422,
            "sla_hours must be null",
        ),
        (
            "/v1/admin/skus/staff-vps",
            json!({"monthly_price_minor": -1}),
            400,
            "monthly_price_minor must be 0 or more",
        ),
        (
            "/v1/admin/skus/staff-vps",
            json!({"sla_hours": 0}),
            400,
            "sla_hours must be between",
        ),
        (
            "/v1/admin/skus/staff-vps",
            json!({"badges": ["A B"]}),
            400,
            "badges",
        ),
        (
            "/v1/admin/skus/staff-vps",
            json!({}),
            400,
            "nothing to change",
        ),
        (
            "/v1/admin/skus/staff-vps",
            json!({"id": "other"}),
            400,
            "unknown field `id`",
        ),
        (
            "/v1/admin/skus/no-such-sku",
            json!({"listed": false}),
            404,
            "not found",
        ),
        (
            "/v1/admin/skus/NO%20SUCH",
            json!({"listed": false}),
            404,
            "not found",
        ),
    ] {
        let r = admin(&s, "PATCH", path, &staff, Some(body.clone())).await;
        assert_eq!(r.status, status, "{path} {body}: {:?}", r.body);
        assert!(r.error().contains(says), "{path} {body}: {}", r.error());
    }
    // The currency it already has is no change.
    let r = admin(
        &s,
        "PATCH",
        "/v1/admin/skus/staff-gpu",
        &staff,
        Some(json!({"currency": "EUR", "position": 9})),
    )
    .await;
    assert_eq!(
        (r.status, r.body["position"].as_i64()),
        (200, Some(9)),
        "{:?}",
        r.body
    );

    // Retire: gone from the list, refused for new orders (400, as for any
    // SKU not in the catalog), while the server on it keeps working.
    let r = order(&s, &owner, &org, "staff-vps", "web-1").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let server = sid(&r);
    wait_for(&s, &owner, &server, "active").await;
    let r = admin(
        &s,
        "PATCH",
        "/v1/admin/skus/staff-vps",
        &staff,
        Some(json!({"listed": false})),
    )
    .await;
    assert_eq!(
        (r.status, r.body["listed"].clone()),
        (200, json!(false)),
        "{:?}",
        r.body
    );
    assert!(listed(&s).await.iter().all(|k| k["id"] != "staff-vps"));
    let r = order(&s, &owner, &org, "staff-vps", "web-2").await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.error(), "sku_id is not a SKU of the catalog");
    let d = p_call(
        &s,
        "GET",
        &format!("/v1/servers/{server}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!((d.status, d.body["status"].clone()), (200, json!("active")));
    assert!(d.body["credentials"]["password"].is_string());
    let r = p_call(
        &s,
        "POST",
        &format!("/v1/servers/{server}/power"),
        Some(&owner),
        Some(json!({"action": "reboot"})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Staff still see it, unlisted.
    let all = admin(&s, "GET", "/v1/admin/skus", &staff, None).await;
    let retired = all
        .body
        .as_array()
        .and_then(|a| a.iter().find(|k| k["id"] == "staff-vps").cloned())
        .expect("still there");
    assert_eq!(retired["listed"], false);

    // Each change is an audit event of the staff member.
    let seen = eventually(Duration::from_secs(10), || async {
        let log = s.get("/v1/audit/me", Some(&staff)).await;
        let entries = log.array("");
        let ours: Vec<(String, String)> = entries
            .iter()
            .filter(|e| e["action"].as_str().is_some_and(|a| a.starts_with("sku.")))
            .map(|e| (e.text("action").to_owned(), e.text("subject").to_owned()))
            .collect();
        (ours.len() >= 5).then_some(ours)
    })
    .await
    .expect("the audit events arrived");
    for want in [
        ("sku.created", "sku:staff-vps"),
        ("sku.created", "sku:staff-gpu"),
        ("sku.updated", "sku:staff-gpu"),
        ("sku.updated", "sku:staff-vps"),
    ] {
        assert!(
            seen.iter().any(|(a, s)| (a.as_str(), s.as_str()) == want),
            "{want:?} in {seen:?}"
        );
    }
}
