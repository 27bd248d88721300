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
