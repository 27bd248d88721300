use serde_json::json;
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, StackOptions, TestStack};

#[tokio::test]
async fn organizations_are_routed_to_a_distributor_by_country() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("founder@example.com").await;
    let tr = s.create_org(&t, "Yerli A.Ş.", "TR").await;
    assert_eq!(tr.status, 201, "{:?}", tr.body);
    assert_eq!(tr.body["distributor_entity"], "Hub Türkiye");
    assert_eq!(tr.body["country"], "TR");
    assert_eq!(tr.body["legal_type"], "corporate");
    assert_eq!(tr.body["kyc_status"], "unverified");
    assert_eq!(tr.body["kyc_tier"], 0);
    let de = s.create_org(&t, "GmbH", "DE").await;
    assert_eq!(de.status, 201);
    assert_eq!(de.body["distributor_entity"], "Hub Europe (VAT OSS)");
    let fr = s.create_org(&t, "SARL", "FR").await;
    assert_eq!(
        fr.body["distributor_entity_id"],
        de.body["distributor_entity_id"]
    );
    assert_ne!(
        tr.body["distributor_entity_id"],
        de.body["distributor_entity_id"]
    );
    for uncovered in ["US", "GB", "CH", "NO"] {
        let r = s.create_org(&t, "Elsewhere", uncovered).await;
        assert_eq!(r.status, 422, "{uncovered}: {:?}", r.body);
        assert_eq!(
            r.error(),
            format!("no distributor entity covers country {uncovered}")
        );
    }
    // Wallets in the right currency, created with the organization.
    for (org, currency) in [(&tr, "TRY"), (&de, "EUR"), (&fr, "EUR")] {
        let w = s
            .get(
                &format!("/v1/organizations/{}/wallet", org.text("id")),
                Some(&t),
            )
            .await;
        assert_eq!(w.status, 200);
        assert_eq!(w.body["currency"], currency);
        assert_eq!(w.body["balance_minor"], 0);
    }
    // Nothing was half-written for the refused one.
    let n: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM org_billing.organizations"#,)
        .fetch_one(&s.db)
        .await
        .unwrap_or(-1);
    let w: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM org_billing.wallets"#,)
        .fetch_one(&s.db)
        .await
        .unwrap_or(-1);
    assert_eq!((n, w), (3, 3));
}

#[tokio::test]
async fn invalid_organization_input_is_refused() {
    let s = TestStack::spawn().await;
    let t = s.sign_in("v@example.com").await;
    let cases = [
        json!({"name": "A", "legal_type": "corporate"}),
        json!({"name": "A", "legal_type": "llc", "country": "TR"}),
        json!({"name": "A", "legal_type": "individual", "country": "tr"}),
        json!({"name": "A", "legal_type": "individual", "country": "XX"}),
        json!({"name": "A", "legal_type": "individual", "country": "TUR"}),
        json!({"name": "  ", "legal_type": "individual", "country": "TR"}),
        json!({"name": "n".repeat(201), "legal_type": "individual", "country": "TR"}),
        json!({"name": "A", "legal_type": "individual", "country": "TR", "extra": 1}),
    ];
    for c in cases {
        let r = s.post("/v1/organizations", Some(&t), c.clone()).await;
        assert_eq!(r.status, 400, "{c}: {:?}", r.body);
        assert!(!r.error().is_empty());
    }
}

#[tokio::test]
async fn the_creator_is_owner_in_their_very_next_me() {
    let s = TestStack::spawn_with(StackOptions {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let t = s.sign_in("ryw@example.com").await;
    // Warm both gateways' caches with the membership-less identity.
    for g in &s.gateways {
        let r = s
            .call(
                "GET",
                &format!("{}/v1/auth/me", g.core),
                Some(&t),
                None,
                &[],
            )
            .await;
        assert_eq!(r.body["memberships"], json!([]));
    }
    let org = s.create_org(&t, "Fresh", "TR").await;
    let id = org.body["id"].clone();
    let owner = json!([{"org_id": id, "role": "owner"}]);
    let me_at = |core: String| {
        let (s, t) = (&s, &t);
        async move {
            s.call("GET", &format!("{core}/v1/auth/me"), Some(t), None, &[])
                .await
                .body["memberships"]
                .clone()
        }
    };
    // The gateway that answered the creation dropped its entry before the
    // answer: at once. Another replica drops it when identity's
    // `identity.changed` reaches it over NATS, published before the answer
    // too, but delivered on its own time: promptly, not before the next
    // request can possibly be sent.
    assert_eq!(
        me_at(s.gateways[0].core.clone()).await,
        owner,
        "{}",
        s.gateways[0].core
    );
    for g in &s.gateways[1..] {
        let seen = tests_e2e::eventually(std::time::Duration::from_secs(5), || async {
            (me_at(g.core.clone()).await == owner).then_some(())
        })
        .await;
        assert!(seen.is_some(), "{} never saw the new membership", g.core);
    }
    let list = s.get("/v1/organizations", Some(&t)).await;
    assert_eq!(list.body.as_array().map(|a| a.len()), Some(1));
    assert_eq!(list.body[0]["id"], id);
}

#[tokio::test]
async fn the_org_created_event_makes_the_owner_when_the_fast_path_fails() {
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml: "[identity]\nurl = \"http://127.0.0.1:9\"\n".into(),
        ..Default::default()
    })
    .await;
    let t = s.sign_in("slowpath@example.com").await;
    let org = s.create_org(&t, "Eventual", "DE").await;
    assert_eq!(org.status, 201);
    let id = org.body["id"].clone();
    let seen = eventually(Duration::from_secs(10), || async {
        let me = s.get("/v1/auth/me", Some(&t)).await;
        (me.body["memberships"] == json!([{"org_id": id, "role": "owner"}])).then_some(())
    })
    .await;
    assert!(seen.is_some(), "the event never made the creator owner");
}

#[tokio::test]
async fn callers_see_only_their_own_organizations() {
    let s = TestStack::spawn().await;
    let (a, org_a) = s.org_with_owner("a@example.com").await;
    let (b, org_b) = s.org_with_owner("b@example.com").await;
    let list_a = s.get("/v1/organizations", Some(&a)).await;
    let list_a_rows = list_a.array("");
    let ids: Vec<&str> = list_a_rows.iter().map(|o| o.text("id")).collect();
    assert_eq!(ids, [org_a.as_str()]);
    // Another org's detail, wallet, tokens, members: 404, the same as a missing org.
    let missing = uuid::Uuid::new_v4().to_string();
    for org in [&org_b, &missing] {
        for p in [
            "",
            "/wallet",
            "/wallet/transactions",
            "/tokens",
            "/members",
            "/api-keys",
        ] {
            let r = s
                .get(&format!("/v1/organizations/{org}{p}"), Some(&a))
                .await;
            assert_eq!((r.status, r.error()), (404, "not found"), "{org}{p}");
        }
    }
    assert_eq!(
        s.get(&format!("/v1/organizations/{org_b}"), Some(&b))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn organization_detail_shows_role_members_and_finance_fields_by_role() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("o@example.com").await;
    let dev = s.member(&owner, &org, "developer").await;
    let d = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    assert_eq!(d.body["your_role"], "owner");
    assert_eq!(d.body["status"], "active");
    assert_eq!(d.body["wallet_currency"], "TRY");
    assert_eq!(d.body["wallet_balance_minor"], 0);
    assert_eq!(d.body["tokens"], 0);
    assert_eq!(d.body["assets"], 0);
    assert_eq!(d.body["kyc_locked"], false);
    assert!(d.body["kyc_verified_at"].is_null() && d.body["kyc_retention_until"].is_null());
    assert_eq!(d.body["registered_address"]["line1"], "");
    for k in [
        "id",
        "name",
        "legal_type",
        "country",
        "distributor_entity_id",
        "distributor_entity",
        "kyc_status",
        "kyc_tier",
        "legal_name",
        "tax_id",
        "registration_number",
    ] {
        assert!(d.body.get(k).is_some(), "missing {k}");
    }
    let members = eventually(Duration::from_secs(5), || async {
        let d = s
            .get(&format!("/v1/organizations/{org}"), Some(&owner))
            .await;
        (d.body["members"] == 2).then_some(())
    })
    .await;
    assert!(members.is_some(), "member count did not reach 2");
    let d = s.get(&format!("/v1/organizations/{org}"), Some(&dev)).await;
    assert_eq!(d.body["your_role"], "developer");
    assert!(d.body["wallet_currency"].is_null() && d.body["wallet_balance_minor"].is_null());
}

#[tokio::test]
async fn organization_list_and_create_need_a_session() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("k@example.com").await;
    let key = s
        .create_key(&owner, &org, Some("manager"))
        .await
        .text("token")
        .to_owned();
    let r = s.get("/v1/organizations", Some(&key)).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.error(),
        "this endpoint needs a session token; API keys and access tokens are not accepted"
    );
    assert_eq!(s.create_org(&key, "Nope", "TR").await.status, 401);
    assert_eq!(s.get("/v1/organizations", None).await.status, 401);
}
