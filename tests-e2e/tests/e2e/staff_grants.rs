//! Staff membership through the API (issue 35): a staff member whose session
//! was opened through MFA grants and takes back staff; the configured
//! addresses stay the bootstrap; every change is audited and mailed to the
//! other staff, and the grantee's sessions change at once.

use crate::mail::{mail_toml, messages, temp_dir, Sink, WAIT};
use crate::mfa::{code, enable, mfa_token, mfa_verify, next_step};
use serde_json::{json, Value};
use std::time::Duration;
use tests_e2e::{eventually, StackOptions, TestStack};
use uuid::Uuid;

const STAFF: &str = "staff@example.com";
const OPS: &str = "ops@example.com";
const CAROL: &str = "carol-staffgrant@example.com";

/// `token`'s `/v1/auth/me` says staff = `want` (the gateways drop the cached
/// identity when identity announces the change).
async fn staff_becomes(s: &TestStack, token: &str, want: bool) {
    let seen = eventually(Duration::from_secs(10), || async move {
        let me = s.get("/v1/auth/me", Some(token)).await;
        (me.body["staff"] == want).then_some(())
    })
    .await;
    assert!(seen.is_some(), "staff never became {want}");
}

fn notices_to(out: &std::path::Path, rcpt: &str) -> Vec<String> {
    messages(out)
        .into_iter()
        .filter(|m| m["subject"] == "Hub staff changed" && m["rcpt_tos"] == json!([rcpt]))
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn staff_through_mfa_grant_and_take_back_staff_and_every_staff_member_is_told() {
    let out = temp_dir("staff-grants");
    let (_sink, url) = Sink::plain(&out).await;
    let toml = mail_toml(&url, None).replace(
        "echo_dev_token = false",
        &format!("echo_dev_token = true\nstaff_emails = [\"{STAFF}\", \"{OPS}\"]"),
    );
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: toml,
        ..Default::default()
    })
    .await;
    let carol = s.sign_in(CAROL).await;
    let carol_id = s
        .get("/v1/auth/me", Some(&carol))
        .await
        .text("user_id")
        .to_owned();
    assert_eq!(
        s.get("/v1/auth/me", Some(&carol)).await.body["staff"],
        false
    );
    let path = format!("/v1/admin/staff/{carol_id}");

    // The bootstrap staff member, first with a session opened without MFA.
    let (plain, secret, _) = enable(&s, STAFF).await;
    let staff_id = s
        .get("/v1/auth/me", Some(&plain))
        .await
        .text("user_id")
        .to_owned();
    assert_eq!(s.get("/v1/auth/me", Some(&plain)).await.body["staff"], true);
    let r = s
        .call(
            "PUT",
            &format!("{}{path}", s.core()),
            Some(&plain),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(r.error().contains("MFA"), "{:?}", r.body);
    // Not staff, or no credential.
    let r = s
        .call(
            "PUT",
            &format!("{}{path}", s.core()),
            Some(&carol),
            None,
            &[],
        )
        .await;
    assert_eq!((r.status, r.error()), (403, "staff only"));
    assert_eq!(s.get("/v1/admin/staff", Some(&carol)).await.status, 403);
    assert_eq!(s.get("/v1/admin/staff", None).await.status, 401);
    assert_eq!(s.delete(&path, None).await.status, 401);
    assert_eq!(
        s.get("/v1/auth/me", Some(&carol)).await.body["staff"],
        false
    );

    // Through MFA.
    next_step(&s);
    let token = mfa_token(&s, STAFF).await;
    let r = mfa_verify(&s, json!({"mfa_token": token, "code": code(&s, &secret)})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let strong = r.text("session_token").to_owned();
    let put = |token: String, p: String| {
        let s = &s;
        async move {
            s.call("PUT", &format!("{}{p}", s.core()), Some(&token), None, &[])
                .await
        }
    };
    let r = put(strong.clone(), path.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["user_id"], carol_id.as_str());
    assert_eq!(r.body["email"], CAROL);
    assert_eq!(r.body["source"], "granted");
    // Carol's session, opened before, is staff now.
    staff_becomes(&s, &carol, true).await;
    assert_eq!(s.get("/v1/admin/users", Some(&carol)).await.status, 200);
    // Granting again changes nothing (no second audit entry or mail).
    assert_eq!(put(strong.clone(), path.clone()).await.status, 200);
    // Unknown users, configured staff.
    let r = put(
        strong.clone(),
        format!("/v1/admin/staff/{}", Uuid::new_v4()),
    )
    .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    let r = s
        .delete(&format!("/v1/admin/staff/{staff_id}"), Some(&strong))
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("configuration"), "{:?}", r.body);
    // Granting a configured address adds no grant beside the configuration
    // (which alone decides, so dropping it there demotes them).
    let r = put(strong.clone(), format!("/v1/admin/staff/{staff_id}")).await;
    assert_eq!(
        (r.status, r.body["source"].clone()),
        (200, json!("configured"))
    );
    let grants: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM identity.staff_grants WHERE user_id = $1"#,
        Uuid::parse_str(&staff_id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("the count");
    assert_eq!(grants, 0);

    // The list: the configured addresses (one never signed in), then grants.
    let l = s.get("/v1/admin/staff", Some(&carol)).await;
    assert_eq!(l.status, 200, "{:?}", l.body);
    let rows: Vec<(Value, Value, Value, Value)> = l
        .body
        .as_array()
        .expect("a list")
        .iter()
        .map(|m| {
            (
                m["email"].clone(),
                m["source"].clone(),
                m["user_id"].clone(),
                m["granted_by"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (json!(OPS), json!("configured"), Value::Null, Value::Null),
            (
                json!(STAFF),
                json!("configured"),
                json!(staff_id),
                Value::Null
            ),
            (
                json!(CAROL),
                json!("granted"),
                json!(carol_id),
                json!(staff_id)
            ),
        ]
    );

    // Every other staff member and Carol were told; the actor was not.
    let told = eventually(WAIT, || async {
        let (ops, carol) = (notices_to(&out, OPS), notices_to(&out, CAROL));
        (!ops.is_empty() && !carol.is_empty()).then_some((ops, carol))
    })
    .await
    .expect("the grant mailed to ops and to carol");
    for text in [&told.0[0], &told.1[0]] {
        assert!(
            text.contains(&format!("{STAFF} made {CAROL} staff")),
            "{text}"
        );
    }

    // Taken back: Carol's session is no longer staff, and she is told.
    let r = s.delete(&path, Some(&strong)).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    staff_becomes(&s, &carol, false).await;
    assert_eq!(s.get("/v1/admin/users", Some(&carol)).await.status, 403);
    assert_eq!(s.delete(&path, Some(&strong)).await.status, 404);
    let told = eventually(WAIT, || async {
        let (ops, carol) = (notices_to(&out, OPS), notices_to(&out, CAROL));
        (ops.len() >= 2 && carol.len() >= 2).then_some((ops, carol))
    })
    .await
    .expect("the revocation mailed to ops and to carol");
    assert_eq!(
        (told.0.len(), told.1.len()),
        (2, 2),
        "one notice per change"
    );
    assert!(told
        .0
        .iter()
        .any(|t| t.contains(&format!("{STAFF} took staff away from {CAROL}"))));
    assert!(
        notices_to(&out, STAFF).is_empty(),
        "the actor is not mailed"
    );

    // Audited in the actor's history: one grant, one revocation.
    let log = s.get("/v1/audit/me", Some(&strong)).await;
    let subject = format!("user:{carol_id}");
    let actions: Vec<&str> = log
        .body
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["subject"] == subject.as_str())
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(actions, ["staff.revoked", "staff.granted"]);
}
