use serde_json::json;
use tests_e2e::Json;
use tests_e2e::TestStack;

#[tokio::test]
async fn adding_a_member_creates_the_user_and_grants_the_role() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("boss@example.com").await;
    let r = s
        .add_member(&owner, &org, "New.Hire@Example.com", "finance")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["email"], "new.hire@example.com");
    assert_eq!(r.body["role"], "finance");
    let hire = s.sign_in("new.hire@example.com").await;
    let me = s.get("/v1/auth/me", Some(&hire)).await;
    assert_eq!(me.body["user_id"], r.body["user_id"]);
    assert_eq!(
        me.body["memberships"],
        json!([{"org_id": org, "role": "finance"}])
    );
    let list = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&hire))
        .await;
    assert_eq!(list.status, 200);
    let roles: Vec<(String, String)> = list
        .array("")
        .iter()
        .map(|m| (m.text("email").to_owned(), m.text("role").to_owned()))
        .collect();
    assert_eq!(
        roles,
        [
            ("boss@example.com".to_owned(), "owner".to_owned()),
            ("new.hire@example.com".to_owned(), "finance".to_owned())
        ]
    );
}

#[tokio::test]
async fn changing_a_role_reaches_the_members_identity_at_once() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("boss@example.com").await;
    s.add_member(&owner, &org, "m@example.com", "visitor").await;
    let m = s.sign_in("m@example.com").await;
    assert_eq!(
        s.get("/v1/auth/me", Some(&m)).await.body["memberships"][0]["role"],
        "visitor"
    );
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/wallet"), Some(&m))
            .await
            .status,
        403
    );
    let r = s.add_member(&owner, &org, "m@example.com", "finance").await;
    assert_eq!(r.body["role"], "finance");
    assert_eq!(
        s.get("/v1/auth/me", Some(&m)).await.body["memberships"][0]["role"],
        "finance"
    );
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/wallet"), Some(&m))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn the_owner_role_is_guarded() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("first@example.com").await;
    let manager = s.member(&owner, &org, "manager").await;
    // The last owner cannot be demoted, not even by themselves.
    let r = s
        .add_member(&owner, &org, "first@example.com", "manager")
        .await;
    assert_eq!(
        (r.status, r.error()),
        (409, "the last owner cannot be demoted")
    );
    // Managers neither grant nor take away ownership.
    let r = s.add_member(&manager, &org, "x@example.com", "owner").await;
    assert_eq!(r.status, 403);
    assert!(r.error().contains("owner"), "{}", r.error());
    let r = s
        .add_member(&manager, &org, "first@example.com", "visitor")
        .await;
    assert_eq!(r.status, 403);
    // With a second owner, the first may step down.
    assert_eq!(
        s.add_member(&owner, &org, "second@example.com", "owner")
            .await
            .status,
        200
    );
    let r = s
        .add_member(&owner, &org, "first@example.com", "manager")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        s.get("/v1/auth/me", Some(&owner)).await.body["memberships"][0]["role"],
        "manager"
    );
}

#[tokio::test]
async fn invalid_member_input_is_refused() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("boss@example.com").await;
    for body in [
        json!({"email": "not-an-email", "role": "visitor"}),
        json!({"email": "a@example.com", "role": "admin"}),
        json!({"email": "a@example.com"}),
        json!({"role": "visitor"}),
    ] {
        let r = s
            .post(
                &format!("/v1/organizations/{org}/members"),
                Some(&owner),
                body.clone(),
            )
            .await;
        assert_eq!(r.status, 400, "{body}");
    }
    let r = s
        .post(
            "/v1/organizations/not-a-uuid/members",
            Some(&owner),
            json!({"email": "a@example.com", "role": "visitor"}),
        )
        .await;
    assert_eq!(r.status, 400);
}
