use serde_json::json;
use tests_e2e::{StackOptions, TestStack};

#[tokio::test]
async fn creating_a_key_shows_the_token_once_and_keeps_only_its_hash() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("keys@example.com").await;
    let r = s.create_key(&owner, &org, None).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let token = r.text("token").to_owned();
    assert!(
        token.starts_with("svc_live_") && token.len() >= 9 + 43,
        "{token}"
    );
    assert_eq!(r.body["key"]["role"], "developer", "default role");
    assert_eq!(r.body["key"]["name"], "ci key");
    assert!(r.body["key"]["revoked_at"].is_null() && r.body["key"]["created_at"].is_string());
    let list = s
        .get(&format!("/v1/organizations/{org}/api-keys"), Some(&owner))
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body.as_array().map(|a| a.len()), Some(1));
    assert_eq!(list.body[0]["id"], r.body["key"]["id"]);
    assert!(
        !list.body.to_string().contains(&token[9..]),
        "the list never shows the token"
    );
    let hash: Vec<u8> = sqlx::query_scalar!("SELECT token_hash FROM identity.api_keys")
        .fetch_one(&s.db)
        .await
        .expect("the query");
    assert_eq!(
        hash,
        ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref()
    );
}

#[tokio::test]
async fn keys_never_carry_owner_and_need_a_name() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("keys@example.com").await;
    let r = s.create_key(&owner, &org, Some("owner")).await;
    assert_eq!(
        (r.status, r.error()),
        (400, "API keys never carry the owner role")
    );
    assert_eq!(s.create_key(&owner, &org, Some("root")).await.status, 400);
    let r = s
        .post(
            &format!("/v1/organizations/{org}/api-keys"),
            Some(&owner),
            json!({"name": ""}),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .post(
            &format!("/v1/organizations/{org}/api-keys"),
            Some(&owner),
            json!({"role": "visitor"}),
        )
        .await;
    assert_eq!(r.status, 400);
    for role in ["manager", "finance", "developer", "visitor"] {
        let r = s.create_key(&owner, &org, Some(role)).await;
        assert_eq!(
            (r.status, r.body["key"]["role"].as_str()),
            (201, Some(role))
        );
    }
}

#[tokio::test]
async fn a_key_resolves_to_one_membership_at_its_role_and_stays_in_its_org() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("keys@example.com").await;
    let other_org = s
        .create_org(&owner, "Other", "DE")
        .await
        .text("id")
        .to_owned();
    let created = s.create_key(&owner, &org, Some("finance")).await;
    let key = created.text("token").to_owned();
    let me = s.get("/v1/auth/me", Some(&key)).await;
    assert_eq!(me.status, 200);
    assert_eq!(
        me.body["memberships"],
        json!([{"org_id": org, "role": "finance"}])
    );
    assert_eq!(me.body["staff"], false);
    assert_eq!(me.body["user_id"], created.body["key"]["id"]);
    // Role-appropriate access in its org...
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/wallet"), Some(&key))
            .await
            .status,
        200
    );
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/tokens"), Some(&key))
            .await
            .status,
        200
    );
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/api-keys"), Some(&key))
            .await
            .status,
        403
    );
    // ...and nothing of another org, though its creator owns that one.
    for p in ["", "/wallet", "/tokens", "/members"] {
        assert_eq!(
            s.get(&format!("/v1/organizations/{other_org}{p}"), Some(&key))
                .await
                .status,
            404,
            "{p}"
        );
    }
}

#[tokio::test]
async fn keys_are_refused_on_session_only_endpoints() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("keys@example.com").await;
    let key = s
        .create_key(&owner, &org, Some("manager"))
        .await
        .text("token")
        .to_owned();
    for (m, p) in [
        ("GET", "/v1/profile"),
        ("PATCH", "/v1/profile"),
        ("PATCH", "/v1/auth/me"),
        ("GET", "/v1/auth/sessions"),
        ("POST", "/v1/auth/logout"),
        ("GET", "/v1/audit/me"),
        ("GET", "/v1/organizations"),
        ("POST", "/v1/organizations"),
    ] {
        let r = s
            .call(
                m,
                &format!("{}{p}", s.core()),
                Some(&key),
                Some(json!({})),
                &[],
            )
            .await;
        assert_eq!(r.status, 401, "{m} {p}: {:?}", r.body);
        // The profile takes a person's access token too (never a key).
        let expected = if p == "/v1/profile" {
            "this endpoint needs a person's credential; API keys are not accepted"
        } else {
            "this endpoint needs a session token; API keys and access tokens are not accepted"
        };
        assert_eq!(r.error(), expected, "{m} {p}");
    }
}

#[tokio::test]
async fn a_revoked_key_stops_at_once_on_every_gateway() {
    let s = TestStack::spawn_with(StackOptions {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("keys@example.com").await;
    let created = s.create_key(&owner, &org, Some("visitor")).await;
    let key = created.text("token").to_owned();
    let id = created.text("/key/id").to_owned();
    for g in &s.gateways {
        assert_eq!(
            s.call(
                "GET",
                &format!("{}/v1/auth/me", g.core),
                Some(&key),
                None,
                &[]
            )
            .await
            .status,
            200
        );
    }
    let del = s
        .call(
            "DELETE",
            &format!(
                "{}/v1/organizations/{org}/api-keys/{id}",
                s.gateways[1].core
            ),
            Some(&owner),
            None,
            &[],
        )
        .await;
    assert_eq!(del.status, 200);
    for g in &s.gateways {
        let r = s
            .call(
                "GET",
                &format!("{}/v1/auth/me", g.core),
                Some(&key),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 401, "{} still accepts a revoked key", g.core);
    }
    let again = s
        .delete(
            &format!("/v1/organizations/{org}/api-keys/{id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(again.status, 404, "already revoked");
    let list = s
        .get(&format!("/v1/organizations/{org}/api-keys"), Some(&owner))
        .await;
    assert!(list.body[0]["revoked_at"].is_string());
}

#[tokio::test]
async fn the_product_host_serves_the_key_operations_under_core_api() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("brandkeys@example.com").await;
    let base = format!("{}/core-api/v1/organizations/{org}/api-keys", s.product());
    let r = s
        .call(
            "POST",
            &base,
            Some(&owner),
            Some(json!({"name": "brand", "role": "manager"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 201);
    let id = r.text("/key/id").to_owned();
    let key = r.text("token").to_owned();
    let list = s.call("GET", &base, Some(&owner), None, &[]).await;
    assert_eq!(list.body.as_array().map(|a| a.len()), Some(1));
    // The key works on both hosts at its role.
    let members = format!("/v1/organizations/{org}/members");
    for url in [
        format!("{}{members}", s.core()),
        format!("{}/core-api{members}", s.product()),
    ] {
        let r = s.call("GET", &url, Some(&key), None, &[]).await;
        assert_eq!(r.status, 200, "{url}: {:?}", r.body);
    }
    let me = s
        .call(
            "GET",
            &format!("{}/core-api/v1/auth/me", s.product()),
            Some(&key),
            None,
            &[],
        )
        .await;
    assert_eq!(me.body["memberships"][0]["role"], "manager");
    let del = s
        .call("DELETE", &format!("{base}/{id}"), Some(&owner), None, &[])
        .await;
    assert_eq!(del.status, 200);
    for url in [
        format!("{}{members}", s.core()),
        format!("{}/core-api{members}", s.product()),
    ] {
        let r = s.call("GET", &url, Some(&key), None, &[]).await;
        assert_eq!(
            (r.status, r.error()),
            (401, "invalid or expired credential"),
            "{url}"
        );
    }
}
