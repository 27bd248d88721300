//! Staff read any organization as a visitor would, in every service, and
//! each such read is audited as `staff.org_read` in the staff member's
//! history; writes stay the explicit admin routes (not a member: 404).

use serde_json::json;
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, TestStack};

#[tokio::test]
async fn staff_read_any_organization_as_a_visitor_and_each_read_is_audited() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let outsider = s.sign_in("outsider@example.com").await;
    let (owner, org) = s.org_with_owner("staff-read@example.com").await;
    let r = s
        .post(
            &format!("/v1/organizations/{org}/projects"),
            Some(&owner),
            json!({"name": "Seen by staff"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    let core = |p: &str| format!("{}{p}", s.core());
    let product = |p: &str| format!("{}{p}", s.product());
    let reads = [
        core(&format!("/v1/organizations/{org}")),
        core(&format!("/v1/organizations/{org}/members")),
        core(&format!("/v1/organizations/{org}/projects")),
        core(&format!("/v1/organizations/{org}/tokens")),
        product(&format!("/v1/servers?org_id={org}")),
        product(&format!("/v1/webhooks?org_id={org}")),
    ];
    // Neither a member nor staff: nothing exists.
    for url in &reads {
        let r = s.call("GET", url, Some(&outsider), None, &[]).await;
        assert_eq!(r.status, 404, "outsider {url}: {:?}", r.body);
    }
    // Staff read each, as a visitor would.
    for url in &reads {
        let r = s.call("GET", url, Some(&staff), None, &[]).await;
        assert_eq!(r.status, 200, "staff {url}: {:?}", r.body);
    }
    let projects = s
        .get(&format!("/v1/organizations/{org}/projects"), Some(&staff))
        .await;
    assert_eq!(projects.array("")[0].text("name"), "Seen by staff");
    // Reading is not writing: a staff member who is not a member changes nothing.
    let r = s
        .post(
            &format!("/v1/organizations/{org}/projects"),
            Some(&staff),
            json!({"name": "Staff made"}),
        )
        .await;
    assert_eq!(r.status, 404, "{:?}", r.body);

    // Audited in the staff member's history, one entry per read, naming the
    // organization and the route (read by the service that served it).
    let subject = format!("org:{org}");
    let routes = eventually(Duration::from_secs(20), || async {
        let log = s.get("/v1/audit/me", Some(&staff)).await;
        let routes: Vec<String> = log
            .array("")
            .iter()
            .filter(|e| e["action"] == "staff.org_read" && e["subject"] == subject.as_str())
            .map(|e| e["detail"].text("route").to_owned())
            .collect();
        (routes.len() > reads.len()).then_some(routes)
    })
    .await
    .expect("every staff read audited");
    for route in [
        "/v1/organizations/{id}",
        "/v1/organizations/{id}/members",
        "/v1/organizations/{id}/projects",
        "/v1/organizations/{id}/tokens",
        "/v1/servers",
        "/v1/webhooks",
    ] {
        assert!(routes.iter().any(|r| r == route), "{route} in {routes:?}");
    }
    // The owner's own reads are not staff reads.
    let owner_log = s.get("/v1/audit/me", Some(&owner)).await;
    assert!(
        owner_log
            .array("")
            .iter()
            .all(|e| e["action"] != "staff.org_read"),
        "{:?}",
        owner_log.body
    );
}
