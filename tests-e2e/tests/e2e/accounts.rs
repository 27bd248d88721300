//! Projects and organization assets through the gateway: who reads and who
//! writes, the 404 contract products rely on for `GET /v1/projects/{id}`,
//! bounds, pages and the count in OrganizationDetail.

use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, TestStack};

fn id(v: &Value) -> String {
    v.text("id").to_owned()
}

/// Wait until every one of `actions` is recorded for `org` (true), or 10 s.
async fn audited(s: &TestStack, org: &str, actions: &[&str]) -> bool {
    let subject = format!("org:{org}");
    eventually(Duration::from_secs(10), || async {
        let rows: Vec<String> = sqlx::query_scalar!(
            r#"SELECT action AS "v!" FROM identity.audit_log WHERE subject = $1 ORDER BY id"#,
            subject,
        )
        .fetch_all(&s.db)
        .await
        .expect("the query");
        actions
            .iter()
            .all(|a| rows.iter().any(|r| r == a))
            .then_some(())
    })
    .await
    .is_some()
}

#[tokio::test]
async fn a_project_answers_its_members_keys_and_staff_and_404_to_everyone_else() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("proj-owner@example.com").await;
    let visitor = s.member(&owner, &org, "visitor").await;
    let key = s.create_key(&owner, &org, Some("visitor")).await;
    let key = key.text("token").to_owned();
    let (outsider, other_org) = s.org_with_owner("proj-outsider@example.com").await;
    let staff = s.sign_in("staff@example.com").await;

    let made = s
        .post(
            &format!("/v1/organizations/{org}/projects"),
            Some(&owner),
            json!({"name": "  Web shop ", "description": "the storefront"}),
        )
        .await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    assert_eq!(made.body["name"], "Web shop");
    assert_eq!(made.body["description"], "the storefront");
    assert_eq!(made.body["org_id"], org.as_str());
    assert!(made.body["created_at"].is_string());
    let pid = id(&made.body);
    let path = format!("/v1/projects/{pid}");

    // Any member, and the organization's keys on either host: the same 200.
    for token in [&owner, &visitor, &key] {
        let r = s.get(&path, Some(token)).await;
        assert_eq!((r.status, &r.body), (200, &made.body));
    }
    let via_product = s
        .call(
            "GET",
            &format!("{}/core-api{path}", s.product()),
            Some(&key),
            None,
            &[],
        )
        .await;
    assert_eq!((via_product.status, &via_product.body), (200, &made.body));

    // Everyone else: 404, exactly as for a project that does not exist.
    let missing = s
        .get(
            &format!("/v1/projects/{}", uuid::Uuid::new_v4()),
            Some(&owner),
        )
        .await;
    assert_eq!(missing.status, 404);
    // Staff read it as a visitor would (audited), and change nothing.
    let r = s.get(&path, Some(&staff)).await;
    assert_eq!((r.status, &r.body), (200, &made.body), "staff read");
    for (token, methods) in [
        (&outsider, &["GET", "PATCH", "DELETE"][..]),
        (&staff, &["PATCH", "DELETE"][..]),
    ] {
        for (method, body) in [
            ("GET", None),
            ("PATCH", Some(json!({"name": "x"}))),
            ("DELETE", None),
        ]
        .into_iter()
        .filter(|(m, _)| methods.contains(m))
        {
            let r = s
                .call(
                    method,
                    &format!("{}{path}", s.core()),
                    Some(token),
                    body,
                    &[],
                )
                .await;
            assert_eq!((r.status, &r.body), (404, &missing.body), "{method}");
        }
    }
    assert_eq!(s.get(&path, None).await.status, 401);
    let other_list = s
        .get(
            &format!("/v1/organizations/{other_org}/projects"),
            Some(&owner),
        )
        .await;
    assert_eq!(other_list.status, 404);

    // Deleted: 404 to its members too from then on.
    let gone = s.delete(&path, Some(&owner)).await;
    assert_eq!((gone.status, &gone.body), (200, &made.body));
    for token in [&owner, &key] {
        assert_eq!(s.get(&path, Some(token)).await.status, 404);
    }
    assert_eq!(s.delete(&path, Some(&owner)).await.status, 404);
    assert!(audited(&s, &org, &["project.created", "project.deleted"]).await);
}

#[tokio::test]
async fn projects_are_written_by_the_admin_roles_within_bounds_and_listed_by_page() {
    let s = TestStack::spawn_with(tests_e2e::StackOptions {
        org_billing_toml: "[orgs]\nmax_projects = 3\n".to_owned(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("proj-writer@example.com").await;
    let manager = s.member(&owner, &org, "manager").await;
    let finance = s.member(&owner, &org, "finance").await;
    let developer = s.member(&owner, &org, "developer").await;
    let projects = format!("/v1/organizations/{org}/projects");

    for token in [&finance, &developer] {
        let r = s
            .post(&projects, Some(token), json!({"name": "Nope"}))
            .await;
        assert_eq!(r.status, 403, "{:?}", r.body);
        assert_eq!(r.error(), "insufficient role: requires owner or manager");
    }
    for bad in [
        json!({}),
        json!({"name": " "}),
        json!({"name": "n".repeat(201)}),
        json!({"name": "ok", "description": "d".repeat(1001)}),
        json!({"name": "ok", "color": "red"}),
        json!({"name": "bad\u{0007}"}),
    ] {
        let r = s.post(&projects, Some(&owner), bad.clone()).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
        assert!(!r.error().is_empty());
    }
    let mut ids = Vec::new();
    for (token, name) in [(&owner, "One"), (&manager, "Two"), (&owner, "Three")] {
        let r = s.post(&projects, Some(token), json!({"name": name})).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        assert_eq!(r.body["description"], "");
        ids.push(id(&r.body));
    }
    let over = s
        .post(&projects, Some(&owner), json!({"name": "Four"}))
        .await;
    assert_eq!(
        (over.status, over.error()),
        (409, "an organization holds at most 3 projects")
    );

    // Newest first, a page at a time, for any member.
    let first = s
        .get(&format!("{projects}?limit=2"), Some(&developer))
        .await;
    assert_eq!(first.status, 200);
    let names: Vec<&str> = first.body.as_array().map_or(Vec::new(), |a| {
        a.iter().filter_map(|p| p["name"].as_str()).collect()
    });
    assert_eq!(names, ["Three", "Two"]);
    let cursor = first
        .headers
        .get("x-next-cursor")
        .and_then(|v| v.to_str().ok())
        .expect("a next cursor")
        .to_owned();
    let second = s
        .get(
            &format!("{projects}?limit=2&cursor={cursor}"),
            Some(&developer),
        )
        .await;
    assert_eq!(second.body.as_array().map(Vec::len), Some(1));
    assert_eq!(second.body[0]["name"], "One");
    assert!(second.headers.get("x-next-cursor").is_none());
    assert_eq!(
        s.get(&format!("{projects}?limit=0"), Some(&owner))
            .await
            .status,
        400
    );
    assert_eq!(
        s.get(&format!("{projects}?cursor=zz"), Some(&owner))
            .await
            .status,
        400
    );
    // An empty cursor (`?cursor=`, which the schema allows) is the first page.
    let empty = s
        .get(&format!("{projects}?limit=2&cursor="), Some(&developer))
        .await;
    assert_eq!(empty.status, 200, "{:?}", empty.body);
    assert_eq!(empty.body, first.body);

    // PATCH: the admin roles; a member without them sees 403 (not 404).
    let one = format!("/v1/projects/{}", ids[0]);
    let r = s
        .patch(&one, Some(&developer), json!({"name": "Mine"}))
        .await;
    assert_eq!(r.status, 403);
    let r = s
        .patch(&one, Some(&manager), json!({"description": "first one"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (r.body["name"].as_str(), r.body["description"].as_str()),
        (Some("One"), Some("first one"))
    );
    let r = s.patch(&one, Some(&owner), json!({"name": "Uno"})).await;
    assert_eq!(
        (r.body["name"].as_str(), r.body["description"].as_str()),
        (Some("Uno"), Some("first one"))
    );
    let same = s.patch(&one, Some(&owner), json!({"name": null})).await;
    assert_eq!(
        (same.status, &same.body["name"]),
        (200, &json!("Uno")),
        "an empty patch changes nothing"
    );
    // serde would read a patch from an array too: only an object is one.
    for bad in [
        json!({"name": ""}),
        json!({"org_id": org}),
        json!([null, null]),
        json!(null),
    ] {
        assert_eq!(
            s.patch(&one, Some(&owner), bad.clone()).await.status,
            400,
            "{bad}"
        );
    }
    assert_eq!(s.delete(&one, Some(&finance)).await.status, 403);
    // A deletion makes room under the cap.
    assert_eq!(s.delete(&one, Some(&manager)).await.status, 200);
    let r = s
        .post(&projects, Some(&owner), json!({"name": "Four"}))
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
}

#[tokio::test]
async fn assets_are_https_links_written_by_the_admin_roles_and_counted_in_the_detail() {
    let s = TestStack::spawn_with(tests_e2e::StackOptions {
        org_billing_toml: "[orgs]\nmax_assets = 2\n".to_owned(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("assets-owner@example.com").await;
    let visitor = s.member(&owner, &org, "visitor").await;
    let (outsider, _) = s.org_with_owner("assets-outsider@example.com").await;
    let assets = format!("/v1/organizations/{org}/assets");
    let detail = format!("/v1/organizations/{org}");
    assert_eq!(s.get(&detail, Some(&visitor)).await.body["assets"], 0);

    let logo = s
        .post(
            &assets,
            Some(&owner),
            json!({"kind": "logo", "name": "Logo", "url": "https://cdn.example.com/logo.svg", "note": "dark"}),
        )
        .await;
    assert_eq!(logo.status, 201, "{:?}", logo.body);
    assert_eq!(
        logo.body,
        json!({"id": logo.body["id"], "kind": "logo", "name": "Logo",
               "url": "https://cdn.example.com/logo.svg", "note": "dark"})
    );
    for bad in [
        json!({"kind": "logo", "name": "L", "url": "http://cdn.example.com/logo.svg"}),
        json!({"kind": "logo", "name": "L", "url": "javascript:alert(1)"}),
        json!({"kind": "logo", "name": "L", "url": "https://user:pw@example.com/"}),
        json!({"kind": "logo", "name": "L", "url": format!("https://e.com/{}", "a".repeat(2048))}),
        json!({"kind": "picture", "name": "L", "url": "https://e.com/"}),
        json!({"kind": "logo", "name": "", "url": "https://e.com/"}),
        json!({"kind": "logo", "name": "L"}),
        json!({"kind": "logo", "name": "L", "url": "https://e.com/", "size": 3}),
    ] {
        let r = s.post(&assets, Some(&owner), bad.clone()).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
    }
    let r = s
        .post(
            &assets,
            Some(&visitor),
            json!({"kind": "link", "name": "Site", "url": "https://example.com/"}),
        )
        .await;
    assert_eq!(r.status, 403);
    let r = s
        .post(
            &assets,
            Some(&outsider),
            json!({"kind": "link", "name": "Site", "url": "https://example.com/"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let site = s
        .post(
            &assets,
            Some(&owner),
            json!({"kind": "link", "name": "Site", "url": "https://example.com/"}),
        )
        .await;
    assert_eq!((site.status, &site.body["note"]), (201, &json!("")));
    let over = s
        .post(
            &assets,
            Some(&owner),
            json!({"kind": "other", "name": "X", "url": "https://x.example/"}),
        )
        .await;
    assert_eq!(
        (over.status, over.error()),
        (409, "an organization holds at most 2 assets")
    );

    // Members read them all, oldest first; the detail counts them.
    let list = s.get(&assets, Some(&visitor)).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body, json!([logo.body, site.body]));
    assert_eq!(s.get(&assets, Some(&outsider)).await.status, 404);
    assert_eq!(s.get(&detail, Some(&visitor)).await.body["assets"], 2);

    let one = format!("{assets}/{}", id(&site.body));
    let r = s
        .patch(
            &one,
            Some(&owner),
            json!({"kind": "document", "note": "terms"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        (
            r.body["kind"].as_str(),
            r.body["note"].as_str(),
            r.body["name"].as_str()
        ),
        (Some("document"), Some("terms"), Some("Site"))
    );
    assert_eq!(
        s.patch(&one, Some(&owner), json!({"url": "ftp://e.com/"}))
            .await
            .status,
        400
    );
    let same = s.patch(&one, Some(&owner), json!({})).await;
    assert_eq!(
        (same.status, &same.body),
        (200, &r.body),
        "an empty patch changes nothing"
    );
    assert_eq!(
        s.patch(&one, Some(&visitor), json!({"note": "x"}))
            .await
            .status,
        403
    );
    // Another organization's asset id under this organization: not found.
    let (o2_owner, org2) = s.org_with_owner("assets-second@example.com").await;
    let elsewhere = format!("/v1/organizations/{org2}/assets/{}", id(&site.body));
    assert_eq!(
        s.patch(&elsewhere, Some(&o2_owner), json!({"note": "x"}))
            .await
            .status,
        404
    );
    assert_eq!(s.delete(&elsewhere, Some(&o2_owner)).await.status, 404);

    let gone = s.delete(&one, Some(&owner)).await;
    assert_eq!(
        (gone.status, gone.body["id"].as_str()),
        (200, Some(id(&site.body).as_str()))
    );
    assert_eq!(s.delete(&one, Some(&owner)).await.status, 404);
    assert_eq!(s.get(&detail, Some(&owner)).await.body["assets"], 1);
    assert!(
        audited(
            &s,
            &org,
            &["asset.created", "asset.updated", "asset.deleted"]
        )
        .await
    );
}
