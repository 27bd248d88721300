//! Distributor entities (issue 19): staff create and change them (country and
//! currency fixed) and name their observers; an observer reads their own
//! entity (detail, staff, organizations, monthly report) and nothing else, and
//! gains nothing on the organizations routed to it.

use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, Resp, TestStack};
use uuid::Uuid;

/// The demo catalog's entity for Turkey (the dev seed).
const HUB_TR: &str = "01930000-0000-7000-8000-000000000001";

fn entity(name: &str, country: &str, currency: &str) -> Value {
    json!({"name": name, "country": country, "legal_name": format!("{name} Ltd."),
           "currency": currency, "tax_id": "NO-998877", "address": "Storgata 1\nOslo",
           "bank_name": "Nordbank", "bank_iban": "NO9386011117947", "bank_swift": "NORDNOKK",
           "contact_phone": "+47 22 00 00 00", "contact_email": "Billing@Example.com",
           "notes": "staff-made", "profit_pct": 12.5})
}

async fn create(s: &TestStack, staff: &str, body: Value) -> Resp {
    s.post("/v1/distributors", Some(staff), body).await
}

/// A new entity made by staff; returns its id.
async fn made(s: &TestStack, staff: &str, name: &str, country: &str, currency: &str) -> String {
    let r = create(s, staff, entity(name, country, currency)).await;
    assert_eq!(r.status, 201, "create {name}: {:?}", r.body);
    r.text("id").to_owned()
}

#[tokio::test]
async fn staff_create_read_and_change_entities_validated_and_audited() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let user = s.sign_in("plain-dist@example.com").await;

    // Staff only, before the body is read.
    let r = create(&s, &user, entity("Nope", "NO", "EUR")).await;
    assert_eq!((r.status, r.error()), (403, "staff only"), "{:?}", r.body);

    // Norway: no entity covers it, so the new one does.
    let r = create(&s, &staff, entity("Hub Norge", "NO", "EUR")).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let id = r.text("id").to_owned();
    for (field, want) in [
        ("name", json!("Hub Norge")),
        ("country", json!("NO")),
        ("legal_name", json!("Hub Norge Ltd.")),
        ("currency", json!("EUR")),
        ("tax_id", json!("NO-998877")),
        ("address", json!("Storgata 1\nOslo")),
        ("bank_iban", json!("NO9386011117947")),
        ("contact_email", json!("billing@example.com")),
        ("profit_pct", json!(12.5)),
        ("covers", json!(["NO"])),
    ] {
        assert_eq!(r.body[field], want, "{field} in {:?}", r.body);
    }
    // An organization in Norway is now routed to it, in its currency.
    let owner = s.sign_in("norway-owner@example.com").await;
    let org = s.create_org(&owner, "Fjord AS", "NO").await;
    assert_eq!(org.status, 201, "{:?}", org.body);
    assert_eq!(org.body["distributor_entity_id"], json!(id));
    // A second entity in a covered country covers nothing: coverage is never
    // moved by a creation (Norway stays on the first, Turkey on the seed).
    let r = create(&s, &staff, entity("Hub Norge II", "NO", "USD")).await;
    assert_eq!(
        (r.status, &r.body["covers"]),
        (201, &json!([])),
        "{:?}",
        r.body
    );
    let r = create(&s, &staff, entity("Hub Anadolu", "TR", "TRY")).await;
    assert_eq!(
        (r.status, &r.body["covers"]),
        (201, &json!([])),
        "{:?}",
        r.body
    );
    let org = s.create_org(&owner, "Fjord II AS", "NO").await;
    assert_eq!(org.body["distributor_entity_id"], json!(id));
    let org = s.create_org(&owner, "Anadolu AS", "TR").await;
    assert_eq!(org.body["distributor_entity_id"], json!(HUB_TR));

    // Every rule: 400, nothing created.
    let mut long = entity("x", "NO", "EUR");
    long["name"] = json!("n".repeat(201));
    let mut bad_cases: Vec<(&str, Value)> = vec![("name too long", long)];
    for (what, field, value) in [
        ("unknown country", "country", json!("XX")),
        ("lower-case country", "country", json!("no")),
        ("unknown currency", "currency", json!("GBP")),
        ("blank name", "name", json!("   ")),
        ("control character", "name", json!("Hub\u{7}")),
        ("blank legal name", "legal_name", json!("")),
        ("bad email", "contact_email", json!("not-an-email")),
        ("notes too long", "notes", json!("n".repeat(2001))),
        ("iban too long", "bank_iban", json!("I".repeat(501))),
        ("tab in a text", "address", json!("a\tb")),
        ("profit over 100", "profit_pct", json!(100.01)),
        ("negative profit", "profit_pct", json!(-1)),
        ("three decimals", "profit_pct", json!(12.345)),
        ("profit as a string", "profit_pct", json!("12.5")),
        ("unknown field", "covers", json!(["NO"])),
    ] {
        let mut b = entity("Bad", "NO", "EUR");
        b[field] = value;
        bad_cases.push((what, b));
    }
    // A missing currency is no longer one of them (issue 32): it follows the
    // country (an_entity_made_with_the_interface_fields_only_...).
    let mut missing = entity("Bad", "NO", "EUR");
    if let Some(m) = missing.as_object_mut() {
        m.remove("name");
    }
    bad_cases.push(("missing name", missing));
    for (what, body) in bad_cases {
        let r = create(&s, &staff, body).await;
        assert_eq!(r.status, 400, "{what}: {:?}", r.body);
    }
    let all = s.get("/v1/distributors", Some(&staff)).await;
    assert_eq!(all.status, 200, "{:?}", all.body);
    let all_rows = all.array("");
    let names: Vec<&str> = all_rows.iter().map(|d| d.text("name")).collect();
    assert_eq!(
        names,
        [
            "Hub Türkiye",
            "Hub Europe (VAT OSS)",
            "Hub Norge",
            "Hub Norge II",
            "Hub Anadolu"
        ],
        "staff see every entity, oldest first"
    );

    // Detail and changes.
    let path = format!("/v1/distributors/{id}");
    let r = s.get(&path, Some(&staff)).await;
    assert_eq!((r.status, &r.body["name"]), (200, &json!("Hub Norge")));
    let r = s
        .patch(
            &path,
            Some(&staff),
            json!({"name": " Hub Norge AS ", "profit_pct": 7.25, "notes": ""}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (&r.body["name"], &r.body["profit_pct"], &r.body["notes"]),
        (&json!("Hub Norge AS"), &json!(7.25), &json!(""))
    );
    assert_eq!(r.body["tax_id"], "NO-998877", "untouched fields stay");
    // Country and currency: the same value is accepted, another is 409.
    let r = s
        .patch(
            &path,
            Some(&staff),
            json!({"country": "NO", "currency": "EUR"}),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["country"]),
        (200, &json!("NO")),
        "{:?}",
        r.body
    );
    let r = s.patch(&path, Some(&staff), json!({"country": "SE"})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("country is fixed"), "{}", r.error());
    let r = s
        .patch(
            &path,
            Some(&staff),
            json!({"currency": "USD", "name": "Renamed"}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    // Null leaves a field as it is.
    let r = s
        .patch(&path, Some(&staff), json!({"notes": null, "name": null}))
        .await;
    assert_eq!(
        (r.status, &r.body["notes"]),
        (200, &json!("")),
        "{:?}",
        r.body
    );
    let r = s.get(&path, Some(&staff)).await;
    assert_eq!(
        (&r.body["country"], &r.body["currency"], &r.body["name"]),
        (&json!("NO"), &json!("EUR"), &json!("Hub Norge AS")),
        "a refused change changes nothing"
    );
    for (what, body) in [
        ("empty", json!({})),
        ("not an object", json!(["name"])),
        ("unknown field", json!({"covers": ["SE"]})),
        ("bad country", json!({"country": "ZZ"})),
        ("bad profit", json!({"profit_pct": 101})),
        ("blank name", json!({"name": ""})),
    ] {
        let r = s.patch(&path, Some(&staff), body).await;
        assert_eq!(r.status, 400, "{what}: {:?}", r.body);
    }
    let unknown = format!("/v1/distributors/{}", Uuid::new_v4());
    let r = s.patch(&unknown, Some(&staff), json!({"name": "x"})).await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(s.get(&unknown, Some(&staff)).await.status, 404);
    let r = s.patch(&path, Some(&user), json!({"name": "x"})).await;
    assert_eq!(r.status, 403, "{:?}", r.body);

    // The creation and the change are audit events of the staff member.
    let subject = format!("distributor:{id}");
    let seen = eventually(Duration::from_secs(10), || async {
        let log = s.get("/v1/audit/me", Some(&staff)).await;
        let entries = log.array("");
        let ours: Vec<Value> = entries
            .into_iter()
            .filter(|e| e["subject"] == json!(subject))
            .collect();
        (ours.len() >= 2).then_some(ours)
    })
    .await
    .expect("the audit events arrived");
    let created = seen
        .iter()
        .find(|e| e["action"] == "distributor.created")
        .unwrap_or_else(|| panic!("distributor.created in {seen:?}"));
    assert_eq!(created["detail"]["country"], "NO");
    assert_eq!(created["detail"]["covers_own_country"], true);
    let updated = seen
        .iter()
        .find(|e| e["action"] == "distributor.updated")
        .unwrap_or_else(|| panic!("distributor.updated in {seen:?}"));
    assert_eq!(
        updated["detail"]["changed"],
        json!(["name", "notes", "profit_pct"])
    );
    assert_eq!(
        updated["detail"]["profit_pct"],
        json!({"from": 12.5, "to": 7.25})
    );
}

#[tokio::test]
async fn staff_name_list_and_remove_observers() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let id = made(&s, &staff, "Hub Island", "IS", "EUR").await;
    let staff_path = format!("/v1/distributors/{id}/staff");

    // A user who never signed in is created by email.
    let r = s
        .post(
            &staff_path,
            Some(&staff),
            json!({"email": " Watcher@Example.com ", "role": "observer"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (&r.body["email"], &r.body["role"]),
        (&json!("watcher@example.com"), &json!("observer"))
    );
    assert!(r.body["since"].is_string(), "{:?}", r.body);
    let watcher_id = r.text("user_id").to_owned();
    // The same user signing in later is that user.
    let watcher = s.sign_in("watcher@example.com").await;
    let me = s.get("/v1/auth/me", Some(&watcher)).await;
    assert_eq!(me.body["user_id"], json!(watcher_id), "{:?}", me.body);

    let r = s
        .post(
            &staff_path,
            Some(&staff),
            json!({"email": "watcher@example.com", "role": "observer"}),
        )
        .await;
    assert_eq!(r.status, 409, "the same user twice: {:?}", r.body);
    for (what, body) in [
        (
            "another role",
            json!({"email": "x@example.com", "role": "owner"}),
        ),
        ("no role", json!({"email": "x@example.com"})),
        ("bad email", json!({"email": "x@", "role": "observer"})),
        (
            "unknown field",
            json!({"email": "x@example.com", "role": "observer", "since": "now"}),
        ),
    ] {
        let r = s.post(&staff_path, Some(&staff), body).await;
        assert_eq!(r.status, 400, "{what}: {:?}", r.body);
    }
    let r = s
        .post(
            &format!("/v1/distributors/{}/staff", Uuid::new_v4()),
            Some(&staff),
            json!({"email": "x@example.com", "role": "observer"}),
        )
        .await;
    assert_eq!(r.status, 404, "unknown entity: {:?}", r.body);
    // Only staff name observers (an observer cannot add another).
    let r = s
        .post(
            &staff_path,
            Some(&watcher),
            json!({"email": "friend@example.com", "role": "observer"}),
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);

    let second = s
        .post(
            &staff_path,
            Some(&staff),
            json!({"email": "second-watcher@example.com", "role": "observer"}),
        )
        .await;
    assert_eq!(second.status, 201, "{:?}", second.body);
    let list = s.get(&staff_path, Some(&staff)).await;
    let list_rows = list.array("");
    let emails: Vec<&str> = list_rows.iter().map(|m| m.text("email")).collect();
    assert_eq!(
        (list.status, emails),
        (
            200,
            vec!["watcher@example.com", "second-watcher@example.com"]
        )
    );
    // An observer reads their entity's staff too.
    assert_eq!(s.get(&staff_path, Some(&watcher)).await.status, 200);

    let member = format!("{staff_path}/{watcher_id}");
    assert_eq!(s.delete(&member, Some(&watcher)).await.status, 403);
    let r = s.delete(&member, Some(&staff)).await;
    assert_eq!((r.status, &r.body), (200, &json!({"status": "removed"})));
    let r = s.delete(&member, Some(&staff)).await;
    assert_eq!(r.status, 404, "removed already: {:?}", r.body);
    let r = s
        .delete(&format!("{staff_path}/{}", Uuid::new_v4()), Some(&staff))
        .await;
    assert_eq!(r.status, 404, "never there: {:?}", r.body);
    let list = s.get(&staff_path, Some(&staff)).await;
    assert_eq!(
        list.body.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        list.body
    );
    // Removed: the entity is gone for them.
    assert_eq!(s.get(&staff_path, Some(&watcher)).await.status, 404);
    assert_eq!(
        s.get(&format!("/v1/distributors/{id}"), Some(&watcher))
            .await
            .status,
        404
    );
    assert_eq!(s.get("/v1/distributors", Some(&watcher)).await.status, 403);

    // Both are audit events of the staff member.
    let subject = format!("distributor:{id}");
    let actions = eventually(Duration::from_secs(10), || async {
        let log = s.get("/v1/audit/me", Some(&staff)).await;
        let entries = log.array("");
        let ours: Vec<String> = entries
            .iter()
            .filter(|e| e["subject"] == json!(subject))
            .filter_map(|e| e["action"].as_str().map(str::to_owned))
            .collect();
        (ours.len() >= 4).then_some(ours)
    })
    .await
    .expect("the audit events arrived");
    for want in [
        "distributor.created",
        "distributor.staff_added",
        "distributor.staff_removed",
    ] {
        assert!(actions.iter().any(|a| a == want), "{want} in {actions:?}");
    }
}

#[tokio::test]
async fn observers_read_their_own_entity_and_nothing_else() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let a = made(&s, &staff, "Hub Norge", "NO", "EUR").await;
    let b = made(&s, &staff, "Hub Island", "IS", "EUR").await;
    let owner = s.sign_in("fjord-owner@example.com").await;
    let mut orgs = Vec::new();
    for name in ["Fjord One AS", "Fjord Two AS", "Fjord Three AS"] {
        let r = s.create_org(&owner, name, "NO").await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        orgs.push(r.text("id").to_owned());
    }
    let r = s.create_org(&owner, "Geysir ehf", "IS").await;
    let b_org = r.text("id").to_owned();
    let r = s
        .post(
            &format!("/v1/distributors/{a}/staff"),
            Some(&staff),
            json!({"email": "observer-a@example.com", "role": "observer"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let observer = s.sign_in("observer-a@example.com").await;
    let plain = s.sign_in("plain@example.com").await;

    // The list: their entity only; a plain user 403.
    let r = s.get("/v1/distributors", Some(&observer)).await;
    let r_rows = r.array("");
    let ids: Vec<&str> = r_rows.iter().map(|d| d.text("id")).collect();
    assert_eq!((r.status, ids), (200, vec![a.as_str()]), "{:?}", r.body);
    let r = s.get("/v1/distributors", Some(&plain)).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(!r.error().is_empty());

    let reads = |id: &str| {
        [
            format!("/v1/distributors/{id}"),
            format!("/v1/distributors/{id}/staff"),
            format!("/v1/distributors/{id}/organizations"),
            format!("/v1/distributors/{id}/report?month=2026-03"),
        ]
    };
    for path in reads(&a) {
        let r = s.get(&path, Some(&observer)).await;
        assert_eq!(r.status, 200, "observer on {path}: {:?}", r.body);
        assert_eq!(
            s.get(&path, Some(&plain)).await.status,
            404,
            "plain on {path}"
        );
        assert_eq!(
            s.get(&path, Some(&staff)).await.status,
            200,
            "staff on {path}"
        );
    }
    for path in reads(&b) {
        let r = s.get(&path, Some(&observer)).await;
        assert_eq!(r.status, 404, "observer on B's {path}: {:?}", r.body);
    }
    for path in reads(&Uuid::new_v4().to_string()) {
        assert_eq!(
            s.get(&path, Some(&staff)).await.status,
            404,
            "staff on {path}"
        );
    }
    // Reads only.
    let r = s
        .patch(
            &format!("/v1/distributors/{a}"),
            Some(&observer),
            json!({"name": "Mine"}),
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);

    // The organizations routed to A, newest first, a page at a time.
    let path = format!("/v1/distributors/{a}/organizations");
    let first = s.get(&format!("{path}?limit=2"), Some(&observer)).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let page_ids = |r: &Resp| -> Vec<String> {
        r.array("")
            .iter()
            .map(|o| o.text("id").to_owned())
            .collect()
    };
    assert_eq!(page_ids(&first), [orgs[2].clone(), orgs[1].clone()]);
    let o = &first.body[0];
    assert_eq!(
        (
            &o["name"],
            &o["country"],
            &o["legal_type"],
            &o["status"],
            &o["kyc_status"]
        ),
        (
            &json!("Fjord Three AS"),
            &json!("NO"),
            &json!("corporate"),
            &json!("active"),
            &json!("unverified")
        )
    );
    assert!(o["created_at"].is_string(), "{o:?}");
    let cursor = first
        .headers
        .get("x-next-cursor")
        .and_then(|v| v.to_str().ok())
        .expect("a next cursor")
        .to_owned();
    let second = s
        .get(&format!("{path}?limit=2&cursor={cursor}"), Some(&observer))
        .await;
    assert_eq!(page_ids(&second), &orgs[..1]);
    assert!(second.headers.get("x-next-cursor").is_none());
    let r = s
        .get(&format!("{path}?cursor=nonsense"), Some(&observer))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = s
        .get(&format!("{path}?limit=2&cursor="), Some(&observer))
        .await;
    assert_eq!((r.status, &r.body), (200, &first.body));
    let r = s.get(&format!("{path}?limit=101"), Some(&observer)).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = s
        .get(&format!("/v1/distributors/{b}/organizations"), Some(&staff))
        .await;
    assert_eq!(page_ids(&r), std::slice::from_ref(&b_org));

    // Not a member of any of them: every organization route is 404.
    for org in orgs.iter().chain([&b_org]) {
        for route in [
            "",
            "/wallet",
            "/wallet/transactions",
            "/tokens",
            "/members",
            "/kyc",
            "/api-keys",
        ] {
            let path = format!("/v1/organizations/{org}{route}");
            let r = s.get(&path, Some(&observer)).await;
            assert_eq!(r.status, 404, "observer on {path}: {:?}", r.body);
        }
    }
    let r = s.get("/v1/organizations", Some(&observer)).await;
    assert_eq!((r.status, &r.body), (200, &json!([])), "{:?}", r.body);
}

/// An invoice row as the billing area writes them (inserted here directly).
struct Invoice<'a> {
    distributor: &'a str,
    org: &'a str,
    kind: &'a str,
    currency: &'a str,
    total: i64,
    paid: i64,
    paid_at: Option<&'a str>,
    voided_at: Option<&'a str>,
}

async fn insert(s: &TestStack, n: usize, i: Invoice<'_>) {
    sqlx::query!(
        "INSERT INTO org_billing.invoices (id, org_id, distributor_id, kind, number, currency, \
                   subtotal_minor, total_minor, paid_minor, issued_at, paid_at, voided_at) \
               VALUES ($1, $2::text::uuid, $3::text::uuid, $4, $5, $6, $7, $7, $8, \
                   '2026-01-15T00:00:00Z', $9::text::timestamptz, $10::text::timestamptz)",
        Uuid::new_v4(),
        i.org,
        i.distributor,
        i.kind,
        format!("TEST-{n:06}"),
        i.currency,
        i.total,
        i.paid,
        i.paid_at,
        i.voided_at,
    )
    .execute(&s.db)
    .await
    .unwrap_or_else(|e| panic!("invoice {n}: {e}"));
}

#[tokio::test]
async fn the_report_sums_the_paid_invoices_of_a_month_per_currency_with_the_share() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let a = made(&s, &staff, "Hub Norge", "NO", "EUR").await; // profit_pct 12.5
    let b = made(&s, &staff, "Hub Island", "IS", "EUR").await;
    let owner = s.sign_in("report-owner@example.com").await;
    let org = s
        .create_org(&owner, "Fjord AS", "NO")
        .await
        .text("id")
        .to_owned();
    let b_org = s
        .create_org(&owner, "Geysir ehf", "IS")
        .await
        .text("id")
        .to_owned();
    let paid = |currency: &'static str, total: i64, at: &'static str| Invoice {
        distributor: &a,
        org: &org,
        kind: "invoice",
        currency,
        total,
        paid: total,
        paid_at: Some(at),
        voided_at: None,
    };
    let rows = [
        // March 2026, UTC: the first and the last second count.
        paid("EUR", 1000, "2026-03-01T00:00:00Z"),
        paid("EUR", 2001, "2026-03-31T23:59:59Z"),
        paid("USD", 999, "2026-03-15T12:00:00Z"),
        // Outside March in UTC.
        paid("EUR", 7000, "2026-02-28T23:59:59Z"),
        paid("EUR", 5000, "2026-04-01T00:00:00Z"),
        paid("EUR", 300, "2026-03-31T23:30:00-01:00"),
        // A proforma paid in March is no invoice.
        Invoice {
            kind: "proforma",
            ..paid("EUR", 6000, "2026-03-10T00:00:00Z")
        },
        // Another entity's.
        Invoice {
            distributor: &b,
            org: &b_org,
            ..paid("USD", 8000, "2026-03-10T00:00:00Z")
        },
        // Partly paid: not collected.
        Invoice {
            paid: 1000,
            paid_at: None,
            ..paid("EUR", 3000, "")
        },
        // Void.
        Invoice {
            paid: 0,
            paid_at: None,
            voided_at: Some("2026-03-20T00:00:00Z"),
            ..paid("USD", 4000, "")
        },
    ];
    for (n, row) in rows.into_iter().enumerate() {
        insert(&s, n, row).await;
    }

    let report = |month: &str, token: &str| {
        let path = format!("/v1/distributors/{a}/report?month={month}");
        let token = token.to_owned();
        let s = &s;
        async move { s.get(&path, Some(&token)).await }
    };
    let r = report("2026-03", &staff).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({
            "distributor_id": a,
            "month": "2026-03",
            "profit_pct": 12.5,
            "currencies": [
                // floor(3001 * 12.5 / 100) = floor(375.125)
                {"currency": "EUR", "paid_invoices": 2, "paid_total_minor": 3001, "share_minor": 375},
                // floor(999 * 12.5 / 100) = floor(124.875)
                {"currency": "USD", "paid_invoices": 1, "paid_total_minor": 999, "share_minor": 124}
            ]
        })
    );
    let r = report("2026-04", &staff).await;
    assert_eq!(
        r.body["currencies"],
        json!([{"currency": "EUR", "paid_invoices": 2, "paid_total_minor": 5300, "share_minor": 662}])
    );
    let r = report("2025-12", &staff).await;
    assert_eq!((r.status, &r.body["currencies"]), (200, &json!([])));

    // The share follows profit_pct.
    let r = s
        .patch(
            &format!("/v1/distributors/{a}"),
            Some(&staff),
            json!({"profit_pct": 33.33}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = report("2026-03", &staff).await;
    assert_eq!(r.body["profit_pct"], 33.33);
    // floor(3001 * 33.33 / 100) = floor(1000.2333), floor(999 * 33.33 / 100) = floor(332.9667)
    assert_eq!(r.body["currencies"][0]["share_minor"], 1000);
    assert_eq!(r.body["currencies"][1]["share_minor"], 332);

    for bad in [
        "2026-13",
        "2026-3",
        "2026-00",
        "26-03",
        "2026-03-01",
        "march",
    ] {
        let r = report(bad, &staff).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
    }
    let r = s
        .get(&format!("/v1/distributors/{a}/report"), Some(&staff))
        .await;
    assert_eq!(r.status, 400, "no month: {:?}", r.body);
}

/// The interface's Distributor fields alone make an entity: `currency` is
/// optional and follows the wallet rule (TRY for Turkey, EUR otherwise); given,
/// it is kept.
#[tokio::test]
async fn an_entity_made_with_the_interface_fields_only_takes_the_currency_of_its_country() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    for (country, given, want) in [
        ("NO", None, "EUR"),
        ("TR", None, "TRY"),
        ("DK", Some(Value::Null), "EUR"),
        ("SE", Some(json!("USD")), "USD"),
    ] {
        let mut body = json!({"name": format!("Hub {country}"), "country": country,
                              "legal_name": format!("Hub {country} Ltd."),
                              "tax_id": "T-1", "address": "Street 1", "bank_name": "Bank",
                              "bank_iban": "IBAN", "bank_swift": "SWIFT", "contact_phone": "+1",
                              "contact_email": "billing@example.com", "notes": "",
                              "profit_pct": 10});
        if let Some(c) = given {
            body["currency"] = c;
        }
        let r = create(&s, &staff, body).await;
        assert_eq!(r.status, 201, "{country}: {:?}", r.body);
        assert_eq!(r.body["currency"], json!(want), "{country}: {:?}", r.body);
        let id = r.body["id"].as_str().expect("an id");
        let read = s.get(&format!("/v1/distributors/{id}"), Some(&staff)).await;
        assert_eq!(
            read.body["currency"],
            json!(want),
            "{country}: {:?}",
            read.body
        );
    }
    // A currency outside the catalog is still refused.
    let mut body = entity("Hub FI", "FI", "GBP");
    body["currency"] = json!("GBP");
    let r = create(&s, &staff, body).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
}
