//! Personal data (issue 15): who reads KYC submissions in full, and
//! org-billing's verified legal identity sealed at rest (for new approvals and
//! for identities an earlier version stored in clear).

use serde_json::{json, Value};
use service_kit::settings::Layered;
use sqlx::{Connection, Executor, PgConnection};
use tests_e2e::{
    scratch::{self, Only},
    Resp, TestStack,
};

const COMPANY: &str = "Kestrel Lojistik AS";
const TAX_ID: &str = "TX-40417733";
const CITY: &str = "Eskisehir";
const NOTES: &str = "the registry extract is illegible";

async fn org(s: &TestStack, email: &str, legal_type: &str) -> (String, String) {
    let owner = s.sign_in(email).await;
    let r = s
        .post(
            "/v1/organizations",
            Some(&owner),
            json!({"name": "Personal Data Org", "legal_type": legal_type, "country": "TR"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    (owner, r.text("id").to_owned())
}

fn address() -> Value {
    json!({"line1": "Ataturk Blv. 12", "city": CITY, "postal_code": "26010", "country": "TR"})
}

async fn submissions(s: &TestStack, org: &str, token: &str) -> Resp {
    s.get(&format!("/v1/organizations/{org}/kyc"), Some(token))
        .await
}

#[tokio::test]
async fn kyc_submissions_are_read_in_full_by_admins_finance_and_staff_and_as_status_by_others() {
    let s = TestStack::spawn().await;
    let (owner, corp) = org(&s, "pd-kyc-owner@example.com", "corporate").await;
    let manager = s.member(&owner, &corp, "manager").await;
    let finance = s.member(&owner, &corp, "finance").await;
    let developer = s.member(&owner, &corp, "developer").await;
    let visitor = s.member(&owner, &corp, "visitor").await;
    let key = s.create_key(&owner, &corp, Some("visitor")).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    let visitor_key = key.text("token").to_owned();
    let outsider = s.sign_in("pd-kyc-outsider@example.com").await;
    let staff = s.sign_in("staff@example.com").await;

    // A decided submission with review notes and requested fields.
    let r = s
        .post(
            &format!("/v1/organizations/{corp}/kyc"),
            Some(&owner),
            json!({"fields": {"company_name": COMPANY, "tax_id": TAX_ID},
                   "address": address(), "notice_acked": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let sub = r.text("id").to_owned();
    let r = s
        .post(
            &format!("/v1/admin/kyc/{sub}/request-info"),
            Some(&staff),
            json!({"notes": NOTES, "requested_fields": ["fields.tax_id"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // In full: owner, manager, finance (sessions) and staff (not a member).
    for (who, token) in [
        ("owner", &owner),
        ("manager", &manager),
        ("finance", &finance),
        ("staff", &staff),
    ] {
        let r = submissions(&s, &corp, token).await;
        assert_eq!(r.status, 200, "{who}: {:?}", r.body);
        let row = &r.body[0];
        assert_eq!(row["id"], sub.as_str(), "{who}");
        assert_eq!(
            (
                row["fields"]["company_name"].as_str(),
                row["fields"]["tax_id"].as_str(),
                row["address"]["city"].as_str(),
                row["review_notes"].as_str(),
            ),
            (Some(COMPANY), Some(TAX_ID), Some(CITY), Some(NOTES)),
            "{who}"
        );
        assert_eq!(row["requested_fields"], json!(["fields.tax_id"]), "{who}");
    }

    // Status only: visitor (session and API key) and developer.
    for (who, token) in [
        ("visitor session", &visitor),
        ("visitor API key", &visitor_key),
        ("developer", &developer),
    ] {
        let r = submissions(&s, &corp, token).await;
        assert_eq!(r.status, 200, "{who}: {:?}", r.body);
        let rows = r.array("");
        assert_eq!(rows.len(), 1, "{who}: {:?}", r.body);
        let row = &rows[0];
        assert_eq!(
            (
                row["id"].as_str(),
                row["org_id"].as_str(),
                row["status"].as_str(),
                row["legal_type"].as_str()
            ),
            (
                Some(sub.as_str()),
                Some(corp.as_str()),
                Some("more_info_requested"),
                Some("corporate")
            ),
            "{who}"
        );
        assert!(
            row["created_at"].is_string() && row["reviewed_at"].is_string(),
            "{who}: {row}"
        );
        for hidden in ["fields", "address", "review_notes", "requested_fields"] {
            assert!(row.get(hidden).is_none(), "{who} sees {hidden}: {row}");
        }
        let text = r.body.to_string();
        for secret in [COMPANY, TAX_ID, CITY, NOTES] {
            assert!(!text.contains(secret), "{who} sees {secret}");
        }
    }

    // Not a member: nothing, not even whether the organization exists.
    let r = submissions(&s, &corp, &outsider).await;
    assert_eq!((r.status, r.error()), (404, "not found"));
}

#[tokio::test]
async fn org_billing_keeps_the_verified_legal_identity_sealed_and_reads_it_back() {
    let s = TestStack::spawn().await;
    let (owner, ind) = org(&s, "pd-sealed@example.com", "individual").await;
    let visitor = s.member(&owner, &ind, "visitor").await;
    let staff = s.sign_in("staff@example.com").await;
    let (name, national_id) = ("Deniz Karaca", "NID-31415926535");
    let r = s
        .post(
            &format!("/v1/organizations/{ind}/kyc"),
            Some(&owner),
            json!({"fields": {"full_name": name, "national_id": national_id},
                   "address": address(), "notice_acked": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let sub = r.text("id").to_owned();
    let r = s
        .post(
            &format!("/v1/admin/kyc/{sub}/approve"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // A visitor sees the organization verified, its legal identity empty:
    // only the roles that read KYC submissions see it.
    let d = s
        .get(&format!("/v1/organizations/{ind}"), Some(&visitor))
        .await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    assert_eq!(
        (
            d.body["kyc_status"].as_str(),
            d.body["legal_name"].as_str(),
            d.body["tax_id"].as_str(),
            d.body["registered_address"]["line1"].as_str(),
        ),
        (Some("verified"), Some(""), Some(""), Some(""))
    );
    assert!(!d.body.to_string().contains(national_id), "{:?}", d.body);

    // Read back as it was verified (the positive marker for what follows).
    {
        let token = &owner;
        let d = s
            .get(&format!("/v1/organizations/{ind}"), Some(token))
            .await;
        assert_eq!(d.status, 200, "{:?}", d.body);
        assert_eq!(
            (
                d.body["kyc_status"].as_str(),
                d.body["kyc_locked"].as_bool(),
                d.body["legal_name"].as_str(),
                d.body["tax_id"].as_str(),
                d.body["registration_number"].as_str(),
            ),
            (
                Some("verified"),
                Some(true),
                Some(name),
                Some(national_id),
                Some("")
            )
        );
        assert_eq!(
            d.body["registered_address"],
            json!({"line1": "Ataturk Blv. 12", "line2": "", "city": CITY, "region": "",
                   "postal_code": "26010", "country": "TR"})
        );
    }

    // At rest: the sealed column's bytes hold none of it.
    let raw: Option<Vec<u8>> = sqlx::query_scalar!(
        "SELECT legal_identity FROM org_billing.organizations WHERE id = $1::uuid",
        uuid::Uuid::parse_str(&ind).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("legal_identity");
    let raw = raw.expect("a sealed legal identity");
    for secret in [name, national_id, CITY, "Ataturk"] {
        assert!(
            !raw.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "organizations.legal_identity holds {secret} in clear"
        );
    }
    // Nor does any other table or column of org-billing's schema.
    let tables: Vec<String> = sqlx::query_scalar!(
        r#"SELECT table_name::text AS "v!" FROM information_schema.tables
         WHERE table_schema = 'org_billing' AND table_type = 'BASE TABLE'"#,
    )
    .fetch_all(&s.db)
    .await
    .expect("tables");
    assert!(tables.iter().any(|t| t == "organizations"), "{tables:?}");
    for t in tables {
        let dump: String = sqlx::query_scalar(&format!(
            "SELECT COALESCE(string_agg(row_to_json(x)::text, ' '), '') FROM org_billing.\"{t}\" x"
        ))
        .fetch_one(&s.db)
        .await
        .unwrap_or_else(|e| panic!("org_billing.{t}: {e}"));
        for secret in [name, national_id, CITY] {
            assert!(
                !dump.contains(secret),
                "org_billing.{t} holds {secret} in clear"
            );
        }
    }
}

/// The legal identity an earlier version stored in clear.
const OLD_NAME: &str = "Selin Ozturk-Aydin";
const OLD_ID: &str = "NID-27182818284";
const OLD_STREET: &str = "Cumhuriyet Cd. 77";

/// The table's main file as Postgres wrote it (after a checkpoint), read by
/// the administrator.
async fn table_file(admin: &mut PgConnection) -> Vec<u8> {
    admin.execute("CHECKPOINT").await.expect("checkpoint");
    sqlx::query_scalar!(
        r#"SELECT pg_read_binary_file(pg_relation_filepath('org_billing.organizations')) AS "v!""#,
    )
    .fetch_one(&mut *admin)
    .await
    .expect("the table's file")
}

fn holds(bytes: &[u8], s: &str) -> bool {
    bytes.windows(s.len()).any(|w| w == s.as_bytes())
}

#[tokio::test]
async fn identities_stored_in_clear_are_sealed_at_start_up_and_nothing_is_left_behind() {
    let (url, mut admin) = scratch::database().await;
    let role = hub_stack::role_url(&url, "hub_org_billing").expect("role url");
    let key = "m1:bWlncmF0aW9uLXRlc3Qtc2VhbGluZy1rZXktMzJiISE=";
    let layer = |keys: &str| {
        format!("[database]\nurl = {role:?}\nadmin_url = {url:?}\nmax_connections = 4\n[sealing]\nkeys = [{keys}]\nsearch_key = \"migration-test-tax-id-search-key-32-chars\"\n")
    };
    let settings =
        org_billing::Settings::from_layers(&[&layer(&format!("{key:?}"))]).expect("settings");

    // The schema as the previous version left it, with a verified identity in
    // its plaintext columns and an organization never verified.
    let legacy = org_billing::kyc::migrations_before(org_billing::kyc::SEALED_COLUMN_MIGRATION)
        .await
        .expect("legacy migrations");
    let pool = service_kit::db::prepare(
        &settings.database,
        org_billing::SCHEMA,
        "legacy-org-billing",
        &legacy,
    )
    .await
    .expect("legacy schema");
    org_billing::seed::distributors(&pool)
        .await
        .expect("distributors");
    let (verified, unverified) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let distributor: uuid::Uuid = sqlx::query_scalar!(
        "SELECT distributor_id FROM org_billing.distributor_coverage WHERE country = 'TR'",
    )
    .fetch_one(&pool)
    .await
    .expect("a distributor");
    // Runtime strings: the plaintext columns exist only in the legacy schema
    // this test builds (before the migration that drops them), not in the
    // schema the macros check against.
    sqlx::query(
        "INSERT INTO organizations (id, name, legal_type, country, distributor_id, created_by, \
           kyc_status, kyc_tier, kyc_locked, kyc_verified_at, legal_name, tax_id, \
           registration_number, registered_address) VALUES \
         ($1, 'Old Org', 'individual', 'TR', $3, $4, 'verified', 1, true, now(), $5, $6, '', $7), \
         ($2, 'New Org', 'corporate', 'TR', $3, $4, 'unverified', 0, false, NULL, '', '', '', \
          DEFAULT)",
    )
    .bind(verified)
    .bind(unverified)
    .bind(distributor)
    .bind(uuid::Uuid::new_v4())
    .bind(OLD_NAME)
    .bind(OLD_ID)
    .bind(
        json!({"line1": OLD_STREET, "line2": "", "city": "Izmir", "region": "",
                 "postal_code": "35210", "country": "TR"}),
    )
    .execute(&pool)
    .await
    .expect("legacy rows");
    // The check below can fail: the clear identity is in the table's file now.
    let before = table_file(&mut admin).await;
    assert!(holds(&before, OLD_ID) && holds(&before, OLD_NAME));

    // Without a key org-billing refuses to start, and changes nothing.
    let keyless = org_billing::Settings::from_layers(&[&layer("")]).expect("settings");
    assert!(org_billing::migrate(&keyless).await.is_err());
    // The migrations alone (another tool, skipping the sealing step) refuse
    // to drop the plaintext.
    // (On a connection of its own: sqlx keeps its migration lock when a
    // migration fails, until the session ends.)
    let mut bare = PgConnection::connect_with(
        &role
            .parse::<sqlx::postgres::PgConnectOptions>()
            .expect("options")
            .options([("search_path", org_billing::SCHEMA)]),
    )
    .await
    .expect("a connection as org-billing");
    let err = org_billing::MIGRATOR
        .run(&mut bare)
        .await
        .expect_err("the drop refuses while identities are in clear");
    assert!(err.to_string().contains("in clear"), "{err}");
    bare.close().await.ok();
    let still: String = sqlx::query_scalar("SELECT tax_id FROM organizations WHERE id = $1")
        .bind(verified)
        .fetch_one(&pool)
        .await
        .expect("still there");
    assert_eq!(still, OLD_ID);
    pool.close().await;

    // Two replicas starting at once: both start, the rows are sealed once.
    let (a, b) = tokio::join!(
        org_billing::migrate(&settings),
        org_billing::migrate(&settings)
    );
    a.expect("replica a");
    b.expect("replica b");

    let columns: Vec<String> = sqlx::query_scalar!(
        r#"SELECT column_name::text AS "v!" FROM information_schema.columns
         WHERE table_schema = 'org_billing' AND table_name = 'organizations'"#,
    )
    .fetch_all(&mut admin)
    .await
    .expect("columns");
    for gone in [
        "legal_name",
        "tax_id",
        "registration_number",
        "registered_address",
    ] {
        assert!(
            !columns.iter().any(|c| c == gone),
            "{gone} is still a column"
        );
    }
    assert!(columns.iter().any(|c| c == "legal_identity"));

    let rows: Vec<(uuid::Uuid, Option<Vec<u8>>)> =
        sqlx::query!("SELECT id, legal_identity FROM org_billing.organizations ORDER BY name")
            .fetch_all(&mut admin)
            .await
            .expect("rows")
            .into_iter()
            .map(|r| (r.id, r.legal_identity))
            .collect();
    let sealed = |id: uuid::Uuid| {
        rows.iter()
            .find(|(r, _)| *r == id)
            .map(|(_, b)| b.clone())
            .expect("row")
    };
    let old = sealed(verified).expect("the verified identity, sealed");
    for secret in [OLD_NAME, OLD_ID, OLD_STREET] {
        assert!(!holds(&old, secret), "sealed bytes hold {secret}");
    }
    assert!(
        sealed(unverified).is_none(),
        "nothing to seal, nothing stored"
    );

    // It reads back the same, with org-billing's own reader and the key.
    let sealer =
        service_kit::sealed::Sealer::new(&settings.sealing.keys).expect("the test's sealer");
    let opened = org_billing::kyc::open_identity(&sealer, verified.into(), Some(&old))
        .expect("opens for its organization");
    assert_eq!(
        serde_json::to_value(&opened).expect("json"),
        json!({"legal_name": OLD_NAME, "tax_id": OLD_ID, "registration_number": "",
               "registered_address": {"line1": OLD_STREET, "line2": "", "city": "Izmir",
                                      "region": "", "postal_code": "35210", "country": "TR"}})
    );
    assert!(
        org_billing::kyc::open_identity(&sealer, unverified.into(), Some(&old)).is_err(),
        "bound to its organization"
    );
    assert_eq!(
        org_billing::kyc::open_identity(&sealer, unverified.into(), None).expect("empty"),
        org_billing::kyc::empty_identity()
    );

    // Nothing left in the table's files: the rewrite dropped every copy.
    let after = table_file(&mut admin).await;
    for secret in [OLD_NAME, OLD_ID, OLD_STREET] {
        assert!(
            !holds(&after, secret),
            "the table's file still holds {secret}"
        );
    }

    // Starting again changes nothing.
    org_billing::migrate(&settings).await.expect("again");
    let again: Option<Vec<u8>> = sqlx::query_scalar!(
        "SELECT legal_identity FROM org_billing.organizations WHERE id = $1",
        verified,
    )
    .fetch_one(&mut admin)
    .await
    .expect("row");
    assert_eq!(again, Some(old));

    admin.close().await.ok();
    scratch::drop_database(&url).await;
}

#[tokio::test]
async fn name_changes_audited_with_the_name_before_are_rewritten_to_the_field_name() {
    let (url, mut admin) = scratch::database().await;
    let role = hub_stack::role_url(&url, "hub_identity").expect("role url");
    let settings = identity::Settings::from_layers(&[&format!(
        "[database]\nurl = {role:?}\nadmin_url = {url:?}\nmax_connections = 2\n"
    )])
    .expect("settings");
    // identity's schema before this change, with a name change audited the
    // old way and another entry that must not change.
    let legacy = sqlx::migrate::Migrator::new(Only::before(&identity::MIGRATOR, 20261124200001))
        .await
        .expect("legacy");
    let pool = service_kit::db::prepare(&settings.database, identity::SCHEMA, "legacy", &legacy)
        .await
        .expect("legacy schema");
    sqlx::query!(
        "INSERT INTO identity.audit_log (actor_user_id, action, subject, detail) VALUES \
         ($1, 'user.name_changed', 'user:x', '{\"name\": \"Gulsen Eski-Isim\"}'), \
         ($1, 'profile.updated', 'user:x', '{\"fields\": [\"bio\"]}')",
        uuid::Uuid::new_v4(),
    )
    .execute(&pool)
    .await
    .expect("legacy audit rows");
    pool.close().await;

    identity::migrate(&settings).await.expect("migrate");
    let rows: Vec<(String, Value)> =
        sqlx::query!("SELECT action, detail FROM identity.audit_log ORDER BY id")
            .fetch_all(&mut admin)
            .await
            .expect("rows")
            .into_iter()
            .map(|r| (r.action, r.detail))
            .collect();
    assert_eq!(
        rows,
        [
            ("user.name_changed".to_owned(), json!({"fields": ["name"]})),
            ("profile.updated".to_owned(), json!({"fields": ["bio"]})),
        ]
    );

    admin.close().await.ok();
    scratch::drop_database(&url).await;
}
