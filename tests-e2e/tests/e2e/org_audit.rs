//! An organization's audit history (issue 35): every service's actions in
//! it, for owners and managers (and staff, audited as a staff read), filtered
//! by actor, action and time, paged by cursor, exported as NDJSON.

use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, Resp, TestStack};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

fn actions(r: &Resp) -> Vec<String> {
    r.body
        .as_array()
        .unwrap_or_else(|| panic!("a list: {:?}", r.body))
        .iter()
        .map(|e| e["action"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).expect("formats")
}

#[tokio::test]
async fn owners_managers_and_staff_read_an_organizations_history() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (owner, org) = s.org_with_owner("orgaudit-owner@example.com").await;
    let manager = s.member(&owner, &org, "manager").await;
    let developer = s.member(&owner, &org, "developer").await;
    let outsider = s.sign_in("orgaudit-outsider@example.com").await;
    let (other_owner, other) = s.org_with_owner("orgaudit-other@example.com").await;
    let owner_id = s
        .get("/v1/auth/me", Some(&owner))
        .await
        .text("user_id")
        .to_owned();
    // An action in org-billing (arrives as an event) and one in identity.
    let r = s
        .post(
            &format!("/v1/organizations/{org}/projects"),
            Some(&owner),
            json!({"name": "Audited"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = s
        .post(
            &format!("/v1/organizations/{other}/projects"),
            Some(&other_owner),
            json!({"name": "Elsewhere"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let audit = format!("/v1/organizations/{org}/audit");

    let seen = eventually(Duration::from_secs(10), || async {
        let r = s.get(&audit, Some(&owner)).await;
        actions(&r)
            .iter()
            .any(|a| a == "project.created")
            .then_some(r)
    })
    .await
    .expect("the project's creation in the organization's history");
    let all = actions(&seen);
    assert!(all.iter().any(|a| a == "org.member_added"), "{all:?}");
    // Only this organization's: the other's project is not here.
    assert_eq!(all.iter().filter(|a| *a == "project.created").count(), 1);
    let ids: Vec<i64> = seen
        .body
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["id"].as_i64())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");

    // Who may read it.
    assert_eq!(s.get(&audit, Some(&manager)).await.status, 200);
    let r = s.get(&audit, Some(&developer)).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(
        r.error().contains("owner") && r.error().contains("manager"),
        "{}",
        r.error()
    );
    assert_eq!(s.get(&audit, Some(&outsider)).await.status, 404);
    assert_eq!(s.get(&audit, None).await.status, 401);
    let r = s.get(&audit, Some(&staff)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // The staff read is itself in the organization's history.
    let staff_read = eventually(Duration::from_secs(10), || async {
        let r = s
            .get(&format!("{audit}?action=staff.org_read"), Some(&owner))
            .await;
        (actions(&r).len() == 1).then_some(())
    })
    .await;
    assert!(
        staff_read.is_some(),
        "staff's read audited in the organization"
    );

    // Filters.
    let r = s
        .get(&format!("{audit}?action=project.created"), Some(&owner))
        .await;
    assert_eq!(actions(&r), ["project.created"]);
    assert_eq!(r.body[0]["actor_user_id"], owner_id.as_str());
    let r = s
        .get(&format!("{audit}?actor={owner_id}"), Some(&owner))
        .await;
    assert!(r
        .body
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| e["actor_user_id"] == owner_id.as_str()));
    assert!(!actions(&r).is_empty());
    let later = rfc3339(OffsetDateTime::now_utc() + time::Duration::hours(1));
    let r = s
        .get(
            &format!("{audit}?since={}", urlencode(&later)),
            Some(&owner),
        )
        .await;
    assert_eq!(r.body, json!([]));
    for bad in [
        "action=project.exploded",
        "actor=someone",
        "since=yesterday",
    ] {
        let r = s.get(&format!("{audit}?{bad}"), Some(&owner)).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
    }

    // Paged by cursor, older entries on the next page.
    let first = s.get(&format!("{audit}?limit=1"), Some(&owner)).await;
    let cursor = first
        .headers
        .get("x-next-cursor")
        .and_then(|v| v.to_str().ok())
        .expect("a next page")
        .to_owned();
    let second = s
        .get(&format!("{audit}?limit=1&cursor={cursor}"), Some(&owner))
        .await;
    assert!(second.body[0]["id"].as_i64() < first.body[0]["id"].as_i64());

    // The export: a period is required and bounded; NDJSON, every entry.
    let export = format!("{audit}/export");
    assert_eq!(s.get(&export, Some(&owner)).await.status, 400);
    let long_ago = rfc3339(OffsetDateTime::now_utc() - time::Duration::days(400));
    let r = s
        .get(
            &format!(
                "{export}?since={}&until={}",
                urlencode(&long_ago),
                urlencode(&later)
            ),
            Some(&owner),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(s.get(&export, Some(&developer)).await.status, 403);
    let hour_ago = rfc3339(OffsetDateTime::now_utc() - time::Duration::hours(1));
    let url = format!(
        "{}{export}?since={}&until={}",
        s.core(),
        urlencode(&hour_ago),
        urlencode(&later)
    );
    let resp = reqwest::Client::new()
        .get(&url)
        .bearer_auth(&owner)
        .send()
        .await
        .expect("export");
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/x-ndjson")
    );
    let text = resp.text().await.expect("body");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is an entry"))
        .collect();
    let listed = s.get(&audit, Some(&owner)).await;
    assert_eq!(lines.len(), listed.body.as_array().map_or(0, Vec::len));
    assert!(lines.iter().any(|e| e["action"] == "project.created"));
}

fn urlencode(v: &str) -> String {
    reqwest::Url::parse_with_params("http://x/", [("v", v)])
        .expect("a url")
        .query()
        .unwrap_or_default()
        .trim_start_matches("v=")
        .to_owned()
}

#[tokio::test]
async fn an_export_longer_than_a_batch_holds_every_entry_once_newest_first() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("orgaudit-long@example.com").await;
    // More than two export batches (1,000 each) of this organization's
    // history, as the audit consumer would have stored them (an action the
    // test alone writes, so events still arriving do not change the count).
    sqlx::query!(
        "INSERT INTO identity.audit_log (actor_user_id, action, subject, detail, ip)
         SELECT NULL, 'project.updated', 'org:' || $1, '{}', '' FROM generate_series(1, 2500)",
        org,
    )
    .execute(&s.db)
    .await
    .expect("seeded");
    let since = rfc3339(OffsetDateTime::now_utc() - time::Duration::hours(1));
    let until = rfc3339(OffsetDateTime::now_utc() + time::Duration::hours(1));
    let text = reqwest::Client::new()
        .get(format!(
            "{}/v1/organizations/{org}/audit/export?action=project.updated&since={}&until={}",
            s.core(),
            urlencode(&since),
            urlencode(&until)
        ))
        .bearer_auth(&owner)
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("body");
    let ids: Vec<i64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("an entry")["id"]
                .as_i64()
                .expect("an id")
        })
        .collect();
    assert_eq!(ids.len(), 2500);
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "each once, newest first"
    );
}
