//! Member and key management by session only, keys that die with their
//! creator's authority, leaving, and the caps on memberships and creations.

use serde_json::json;
use tests_e2e::{StackOptions, TestStack};
use uuid::Uuid;

fn token(r: &tests_e2e::Resp) -> String {
    r.text("token").to_owned()
}

const SESSION_ONLY: &str = "this operation needs a session: API keys cannot manage members or keys";

#[tokio::test]
async fn a_demoted_manager_cannot_climb_back_through_a_key() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("climb-owner@example.com").await;
    let email = format!("climber-{}@example.com", Uuid::new_v4().simple());
    assert_eq!(
        s.add_member(&owner, &org, &email, "manager").await.status,
        200
    );
    let manager = s.sign_in(&email).await;
    let created = s.create_key(&manager, &org, Some("manager")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let me = s.get("/v1/auth/me", Some(&manager)).await.body["user_id"].clone();
    assert_eq!(created.body["key"]["created_by"], me);
    let key = token(&created);
    // A key never manages members or keys, whatever its role.
    let promote = s.add_member(&key, &org, &email, "manager").await;
    assert_eq!((promote.status, promote.error()), (403, SESSION_ONLY));
    let mint = s.create_key(&key, &org, Some("manager")).await;
    assert_eq!((mint.status, mint.error()), (403, SESSION_ONLY));
    let list = s
        .get(&format!("/v1/organizations/{org}/api-keys"), Some(&key))
        .await;
    assert_eq!((list.status, list.error()), (403, SESSION_ONLY));
    // Demoted to visitor: the keys the manager made die in the same change.
    assert_eq!(
        s.add_member(&owner, &org, &email, "visitor").await.status,
        200
    );
    assert_eq!(s.get("/v1/auth/me", Some(&key)).await.status, 401);
    let keys = s
        .get(&format!("/v1/organizations/{org}/api-keys"), Some(&owner))
        .await;
    assert!(keys.body[0]["revoked_at"].is_string(), "{:?}", keys.body);
    // The owner's own keys are untouched.
    let kept = token(&s.create_key(&owner, &org, Some("developer")).await);
    assert_eq!(
        s.add_member(&owner, &org, &email, "finance").await.status,
        200
    );
    assert_eq!(s.get("/v1/auth/me", Some(&kept)).await.status, 200);
    let audit = s.get("/v1/audit/me", Some(&owner)).await;
    assert!(
        audit
            .body
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["action"] == "org.api_keys_revoked"),
        "{:?}",
        audit.body
    );
}

#[tokio::test]
async fn members_leave_and_admins_remove_but_the_last_owner_stays() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("leave-owner@example.com").await;
    let owner_id = s
        .get("/v1/auth/me", Some(&owner))
        .await
        .text("user_id")
        .to_owned();
    let members = |who: &str| format!("/v1/organizations/{org}/members/{who}");
    let last = s.delete(&members(&owner_id), Some(&owner)).await;
    assert_eq!(
        (last.status, last.error()),
        (409, "the last owner cannot leave the organization")
    );
    // A visitor leaves on their own; their membership is gone at once.
    let visitor = s.member(&owner, &org, "visitor").await;
    let vid = s
        .get("/v1/auth/me", Some(&visitor))
        .await
        .text("user_id")
        .to_owned();
    assert_eq!(
        s.delete(&members(&owner_id), Some(&visitor)).await.status,
        403
    );
    let left = s.delete(&members(&vid), Some(&visitor)).await;
    assert_eq!(left.status, 200, "{:?}", left.body);
    let me = s.get("/v1/auth/me", Some(&visitor)).await;
    assert_eq!(me.body["memberships"], json!([]));
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}"), Some(&visitor))
            .await
            .status,
        404
    );
    assert_eq!(s.delete(&members(&vid), Some(&owner)).await.status, 404);
    // A manager removes a developer but not an owner; a removed manager's keys die.
    let manager = s.member(&owner, &org, "manager").await;
    let mid = s
        .get("/v1/auth/me", Some(&manager))
        .await
        .text("user_id")
        .to_owned();
    let key = token(&s.create_key(&manager, &org, Some("developer")).await);
    assert_eq!(s.get("/v1/auth/me", Some(&key)).await.status, 200);
    let dev = s.member(&owner, &org, "developer").await;
    let did = s
        .get("/v1/auth/me", Some(&dev))
        .await
        .text("user_id")
        .to_owned();
    assert_eq!(s.delete(&members(&did), Some(&manager)).await.status, 200);
    let r = s.delete(&members(&owner_id), Some(&manager)).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "insufficient role: requires owner to remove an owner")
    );
    assert_eq!(s.delete(&members(&mid), Some(&owner)).await.status, 200);
    assert_eq!(s.get("/v1/auth/me", Some(&key)).await.status, 401);
    // A second owner lets the first one leave.
    let co = format!("co-{}@example.com", Uuid::new_v4().simple());
    assert_eq!(s.add_member(&owner, &org, &co, "owner").await.status, 200);
    assert_eq!(
        s.delete(&members(&owner_id), Some(&owner)).await.status,
        200
    );
}

#[tokio::test]
async fn memberships_and_creations_are_capped_with_clear_errors() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[auth]\nmax_memberships_per_user = 2\n".into(),
        org_billing_toml: "[orgs]\nmax_memberships = 3\nmax_created_per_day = 2\n".into(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("cap-owner@example.com").await;
    let second = s.create_org(&owner, "Second", "TR").await;
    assert_eq!(second.status, 201, "{:?}", second.body);
    let third = s.create_org(&owner, "Third", "TR").await;
    assert_eq!(
        (third.status, third.error()),
        (429, "you can create at most 2 organizations per 24 hours")
    );
    // Another user already in two organizations cannot be added to a third.
    let (other_owner, other_a) = s.org_with_owner("cap-other@example.com").await;
    let email = format!("popular-{}@example.com", Uuid::new_v4().simple());
    assert_eq!(
        s.add_member(&owner, &org, &email, "visitor").await.status,
        200
    );
    assert_eq!(
        s.add_member(&other_owner, &other_a, &email, "visitor")
            .await
            .status,
        200
    );
    let second_id = second.text("id");
    let over = s.add_member(&owner, second_id, &email, "visitor").await;
    assert_eq!(
        (over.status, over.error()),
        (
            409,
            "this user already belongs to the maximum of 2 organizations"
        )
    );
    // Changing the role of an existing membership is not a new one.
    assert_eq!(
        s.add_member(&owner, &org, &email, "developer").await.status,
        200
    );
    // org-billing refuses a creation that would pass its cap.
    let popular = s.sign_in(&email).await;
    let r = s.create_org(&popular, "Mine", "TR").await;
    assert_eq!(r.status, 201, "two memberships, cap three: {:?}", r.body);
    let r = s.create_org(&popular, "Mine too", "TR").await;
    assert_eq!(
        (r.status, r.error()),
        (409, "you already belong to the maximum of 3 organizations")
    );
}

#[tokio::test]
async fn a_user_in_many_organizations_is_still_served() {
    // 1,500 memberships (made by hand) with assertions bounded at 100.
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("popular@example.com").await;
    s.db_exec(
        "INSERT INTO identity.memberships (org_id, user_id, role) \
         SELECT gen_random_uuid(), u.id, 'visitor' FROM identity.users u, generate_series(1, 1500) \
         WHERE u.email = 'popular@example.com'",
    )
    .await;
    // Forget the cached identity (a rename changes it and says so).
    assert_eq!(
        s.patch("/v1/auth/me", Some(&owner), json!({"name": "P"}))
            .await
            .status,
        200
    );
    let me = s.get("/v1/auth/me", Some(&owner)).await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["memberships"].as_array().map(Vec::len), Some(1501));
    assert_eq!(s.get("/v1/profile", Some(&owner)).await.status, 200);
    let detail = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await;
    assert_eq!(
        (detail.status, &detail.body["your_role"]),
        (200, &json!("owner"))
    );
    let list = s.get("/v1/organizations", Some(&owner)).await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert!(list
        .body
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| o["id"] == json!(org)));
    let members = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&owner))
        .await;
    assert_eq!(members.status, 200);
}
