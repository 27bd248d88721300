//! Issue 35, the organization's own administration through the API: AI-token
//! usage (the token ledger page by page, the usage summary, every member's AI
//! settings at once).

use serde_json::json;
use tests_e2e::TestStack;

/// `who` spends `amount` tokens of `org` as the agent does.
async fn spend(s: &TestStack, org: &str, who: &str, amount: i64) {
    let path = format!("/internal/v1/organizations/{org}/tokens/spend");
    let r = s
        .internal_call(
            s.service_url("org_billing"),
            "POST",
            &path,
            who,
            json!({"amount": amount, "reason": "assistant"}),
        )
        .await;
    assert_eq!(r.status, 200, "spend: {:?}", r.body);
}

fn next_cursor(r: &tests_e2e::Resp) -> Option<String> {
    r.headers
        .get("x-next-cursor")
        .map(|v| v.to_str().expect("ascii").to_owned())
}

#[tokio::test]
async fn token_transactions_are_paged_for_finance_readers_only() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("tok-owner@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let manager = s.member(&owner, &org, "manager").await;
    let developer = s.member(&owner, &org, "developer").await;
    assert_eq!(s.grant(&staff, &org, 1000).await.status, 200);
    spend(&s, &org, &developer, 10).await;
    spend(&s, &org, &developer, 20).await;
    spend(&s, &org, &manager, 30).await;

    let me = s.get("/v1/auth/me", Some(&developer)).await;
    let dev_id = me.text("user_id").to_owned();
    let path = format!("/v1/organizations/{org}/tokens/transactions");
    for who in [&owner, &finance, &manager, &staff] {
        let r = s.get(&path, Some(who)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.array("").len(), 4);
    }
    let all = s.get(&path, Some(&finance)).await;
    let newest = &all.array("")[0];
    assert_eq!(newest["delta"], -30);
    assert_eq!(newest["kind"], "spend");
    assert_eq!(newest["balance_after"], 940);
    assert!(newest["model"].is_null() && newest["conversation"].is_null());
    let second = &all.array("")[1];
    assert_eq!(
        (second["delta"].clone(), second["member"].clone()),
        (json!(-20), json!(dev_id))
    );
    let grant = &all.array("")[3];
    assert_eq!(
        (grant["delta"].clone(), grant["kind"].clone()),
        (json!(1000), json!("grant"))
    );
    assert!(grant["member"].is_null());

    // Two at a time: the cursor reaches the older ones, and the last page has none.
    let first = s.get(&format!("{path}?limit=2"), Some(&owner)).await;
    assert_eq!(first.array("").len(), 2);
    assert!(first.headers.get("link").is_some());
    let c = next_cursor(&first).expect("a next page");
    let rest = s
        .get(&format!("{path}?limit=2&cursor={c}"), Some(&owner))
        .await;
    assert_eq!(rest.status, 200);
    let deltas: Vec<_> = rest.array("").iter().map(|t| t["delta"].clone()).collect();
    assert_eq!(deltas, vec![json!(-10), json!(1000)]);
    assert!(next_cursor(&rest).is_none());
    assert_eq!(
        s.get(&format!("{path}?cursor=x"), Some(&owner))
            .await
            .status,
        400
    );
    assert_eq!(
        s.get(&format!("{path}?limit=101"), Some(&owner))
            .await
            .status,
        400
    );

    // A developer or visitor: 403 naming the roles; another organization: 404.
    let visitor = s.member(&owner, &org, "visitor").await;
    for who in [&developer, &visitor] {
        let r = s.get(&path, Some(who)).await;
        assert_eq!(
            (r.status, r.error()),
            (
                403,
                "insufficient role: requires owner or manager or finance"
            )
        );
    }
    let (other_owner, _other) = s.org_with_owner("tok-other@example.com").await;
    assert_eq!(s.get(&path, Some(&other_owner)).await.status, 404);
    assert_eq!(
        s.get(
            &format!("/v1/organizations/{org}/tokens/usage"),
            Some(&other_owner)
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn token_usage_is_summed_by_member_model_and_day() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("usage-owner@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let developer = s.member(&owner, &org, "developer").await;
    assert_eq!(s.grant(&staff, &org, 1000).await.status, 200);
    spend(&s, &org, &developer, 10).await;
    spend(&s, &org, &developer, 20).await;
    spend(&s, &org, &owner, 5).await;
    let dev_id = s
        .get("/v1/auth/me", Some(&developer))
        .await
        .text("user_id")
        .to_owned();
    let owner_id = s
        .get("/v1/auth/me", Some(&owner))
        .await
        .text("user_id")
        .to_owned();

    let base = format!("/v1/organizations/{org}/tokens/usage");
    let by_member = s.get(&format!("{base}?by=member"), Some(&owner)).await;
    assert_eq!(by_member.status, 200, "{:?}", by_member.body);
    assert_eq!(by_member.body["total"], 35);
    assert_eq!(
        by_member.body["groups"],
        json!([
            {"member": dev_id, "tokens": 30, "spends": 2},
            {"member": owner_id, "tokens": 5, "spends": 1},
        ])
    );
    let by_model = s.get(&format!("{base}?by=model"), Some(&owner)).await;
    assert_eq!(
        by_model.body["groups"],
        json!([{"model": null, "tokens": 35, "spends": 3}])
    );
    let by_day = s.get(&format!("{base}?by=day"), Some(&owner)).await;
    let groups = by_day.array("groups");
    let tokens: i64 = groups
        .iter()
        .map(|g| g["tokens"].as_i64().expect("a number"))
        .sum();
    assert_eq!(tokens, 35);
    assert!(groups[0]["day"].as_str().expect("a day").len() == 10);

    // A period before the spends has none; periods are bounded.
    let past = s
        .get(
            &format!("{base}?by=day&since=2020-01-01T00:00:00Z&until=2020-02-01T00:00:00Z"),
            Some(&owner),
        )
        .await;
    assert_eq!((past.status, past.body["total"].clone()), (200, json!(0)));
    for bad in [
        "by=project",
        "since=2020-01-01T00:00:00Z&until=2022-01-01T00:00:00Z",
        "since=2020-02-01T00:00:00Z&until=2020-01-01T00:00:00Z",
        "since=yesterday",
    ] {
        assert_eq!(
            s.get(&format!("{base}?{bad}"), Some(&owner)).await.status,
            400,
            "{bad}"
        );
    }
    let r = s.get(&base, Some(&developer)).await;
    assert_eq!(
        (r.status, r.error()),
        (
            403,
            "insufficient role: requires owner or manager or finance"
        )
    );
}

#[tokio::test]
async fn every_members_ai_settings_and_spend_in_one_request() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("ai-owner@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let developer = s.member(&owner, &org, "developer").await;
    let dev_id = s
        .get("/v1/auth/me", Some(&developer))
        .await
        .text("user_id")
        .to_owned();
    assert_eq!(s.grant(&staff, &org, 100).await.status, 200);
    spend(&s, &org, &developer, 7).await;
    let p = s
        .patch(
            &format!("/v1/organizations/{org}/members/{dev_id}/ai"),
            Some(&owner),
            json!({"token_limit": 50}),
        )
        .await;
    assert_eq!(p.status, 200, "{:?}", p.body);

    let path = format!("/v1/organizations/{org}/members/ai");
    for who in [&owner, &staff] {
        let r = s.get(&path, Some(who)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let members = r.array("");
        assert_eq!(members.len(), 2);
        let dev = members
            .iter()
            .find(|m| m["user_id"] == json!(dev_id))
            .expect("the developer");
        assert_eq!(
            (
                dev["role"].clone(),
                dev["ai_enabled"].clone(),
                dev["token_limit"].clone(),
                dev["tokens_spent"].clone()
            ),
            (json!("developer"), json!(true), json!(50), json!(7))
        );
        let own = members
            .iter()
            .find(|m| m["user_id"] != json!(dev_id))
            .expect("the owner");
        assert_eq!(
            (own["token_limit"].clone(), own["tokens_spent"].clone()),
            (json!(null), json!(0))
        );
    }
    let r = s.get(&path, Some(&developer)).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "insufficient role: requires owner or manager")
    );
    let (other_owner, _) = s.org_with_owner("ai-other@example.com").await;
    assert_eq!(s.get(&path, Some(&other_owner)).await.status, 404);
}

#[tokio::test]
async fn staff_search_organizations_by_name_id_tax_id_and_filters() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let owner = s.sign_in("search-owner@example.com").await;
    let mk = |name: &'static str, country: &'static str| {
        let (s, owner) = (&s, owner.clone());
        async move {
            let r = s.create_org(&owner, name, country).await;
            assert_eq!(r.status, 201, "{:?}", r.body);
            r.text("id").to_owned()
        }
    };
    let zephyr = mk("Zephyr Trading", "TR").await;
    let zeta = mk("zeta works", "DE").await;
    let other = mk("Other Co", "TR").await;
    // Verify Other Co's legal identity with a tax id.
    let sub = s
        .post(
            &format!("/v1/organizations/{other}/kyc"),
            Some(&owner),
            json!({"fields": {"company_name": "Other Holding AS", "tax_id": "TX-99 1234", "registration_number": "RN-1"},
                   "address": {"line1": "Kizilay Cd. 1", "city": "Ankara", "postal_code": "06420", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert_eq!(sub.status, 201, "{:?}", sub.body);
    let ok = s
        .post(
            &format!("/v1/admin/kyc/{}/approve", sub.text("id")),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);

    let ids = |r: &tests_e2e::Resp| -> Vec<String> {
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.array("")
            .iter()
            .map(|o| o["id"].as_str().expect("an id").to_owned())
            .collect()
    };
    let by_name = s.get("/v1/admin/organizations?q=ZE", Some(&staff)).await;
    assert_eq!(ids(&by_name), vec![zeta.clone(), zephyr.clone()]);
    let by_id = s
        .get(&format!("/v1/admin/organizations?q={zephyr}"), Some(&staff))
        .await;
    assert_eq!(ids(&by_id), vec![zephyr.clone()]);
    // The tax id however spaced or cased.
    let by_tax = s
        .get("/v1/admin/organizations?q=tx991234", Some(&staff))
        .await;
    assert_eq!(ids(&by_tax), vec![other.clone()]);
    assert_eq!(by_tax.array("")[0]["kyc_status"], "verified");
    let none = s.get("/v1/admin/organizations?q=TX-99", Some(&staff)).await;
    assert!(ids(&none).is_empty());
    let de = s
        .get("/v1/admin/organizations?country=DE", Some(&staff))
        .await;
    assert_eq!(ids(&de), vec![zeta.clone()]);
    let verified = s
        .get(
            "/v1/admin/organizations?kyc_status=verified&status=active",
            Some(&staff),
        )
        .await;
    assert_eq!(ids(&verified), vec![other.clone()]);
    // Paged: one at a time reaches all three.
    let first = s.get("/v1/admin/organizations?limit=1", Some(&staff)).await;
    let mut seen = ids(&first);
    let mut next = next_cursor(&first);
    while let Some(c) = next {
        let r = s
            .get(
                &format!("/v1/admin/organizations?limit=1&cursor={c}"),
                Some(&staff),
            )
            .await;
        seen.extend(ids(&r));
        next = next_cursor(&r);
    }
    assert_eq!(seen, vec![other.clone(), zeta.clone(), zephyr.clone()]);
    for bad in [
        "country=tr",
        "status=closedish",
        "kyc_status=x",
        "limit=0",
        "cursor=x",
    ] {
        let r = s
            .get(&format!("/v1/admin/organizations?{bad}"), Some(&staff))
            .await;
        assert_eq!(r.status, 400, "{bad}");
    }
    let r = s.get("/v1/admin/organizations?q=ze", Some(&owner)).await;
    assert_eq!((r.status, r.error()), (403, "staff only"));
}

#[tokio::test]
async fn the_name_by_admins_the_country_and_legal_type_by_staff_before_kyc() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("patch-owner@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let manager = s.member(&owner, &org, "manager").await;
    let developer = s.member(&owner, &org, "developer").await;
    let path = format!("/v1/organizations/{org}");

    let r = s
        .patch(&path, Some(&owner), json!({"name": "  Acme Renamed  "}))
        .await;
    assert_eq!(
        (r.status, r.body["name"].clone()),
        (200, json!("Acme Renamed")),
        "{:?}",
        r.body
    );
    let r = s
        .patch(&path, Some(&manager), json!({"name": "Acme Two"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(s.get(&path, Some(&owner)).await.body["name"], "Acme Two");
    let r = s
        .patch(&path, Some(&developer), json!({"name": "Nope"}))
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, "insufficient role: requires owner or manager")
    );
    let (other_owner, _) = s.org_with_owner("patch-other@example.com").await;
    assert_eq!(
        s.patch(&path, Some(&other_owner), json!({"name": "X"}))
            .await
            .status,
        404
    );
    for bad in [
        json!({"name": "   "}),
        json!({"name": "x".repeat(201)}),
        json!({"status": "closed"}),
        json!({}),
    ] {
        assert_eq!(
            s.patch(&path, Some(&owner), bad.clone()).await.status,
            400,
            "{bad}"
        );
    }

    // Country and legal type: staff only.
    let r = s
        .patch(&path, Some(&owner), json!({"legal_type": "individual"}))
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, "only staff change the country and legal type")
    );
    let r = s
        .patch(&path, Some(&staff), json!({"legal_type": "individual"}))
        .await;
    assert_eq!(
        (r.status, r.body["legal_type"].clone()),
        (200, json!("individual")),
        "{:?}",
        r.body
    );
    // A country within the organization's distributor entity (the demo
    // catalog's European entity covers DE and FR); one of another entity is
    // 422.
    let euro = s.create_org(&owner, "Acme GmbH", "DE").await;
    assert_eq!(euro.status, 201, "{:?}", euro.body);
    let euro = format!("/v1/organizations/{}", euro.text("id"));
    let r = s.patch(&euro, Some(&staff), json!({"country": "FR"})).await;
    assert_eq!(
        (r.status, r.body["country"].clone()),
        (200, json!("FR")),
        "{:?}",
        r.body
    );
    let r = s.patch(&euro, Some(&staff), json!({"country": "TR"})).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    // After KYC is verified: 409 for staff too; the name still changes.
    let sub = s
        .post(
            &format!("/v1/organizations/{org}/kyc"),
            Some(&owner),
            json!({"fields": {"full_name": "Ayse Yilmaz", "national_id": "NID-55501234"},
                   "address": {"line1": "Kizilay Cd. 1", "city": "Ankara", "postal_code": "06420", "country": "TR"},
                   "notice_acked": true}),
        )
        .await;
    assert_eq!(sub.status, 201, "{:?}", sub.body);
    let ok = s
        .post(
            &format!("/v1/admin/kyc/{}/approve", sub.text("id")),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let r = s
        .patch(&path, Some(&staff), json!({"legal_type": "corporate"}))
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(
        s.patch(&path, Some(&owner), json!({"name": "Acme Three"}))
            .await
            .status,
        200
    );
}
