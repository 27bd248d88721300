//! Invites through the gateway: creation (201, the accept URL only then),
//! listing, revoking, accepting by the invited email only and once, expiry,
//! the bounds, and two accepts racing. The invite mail: `mail.rs`.

use serde_json::json;
use tests_e2e::Json;
use tests_e2e::{Resp, StackOptions, TestStack};
use uuid::Uuid;

async fn invite(s: &TestStack, admin: &str, org: &str, email: &str, role: &str) -> Resp {
    s.post(
        &format!("/v1/organizations/{org}/invites"),
        Some(admin),
        json!({"email": email, "role": role}),
    )
    .await
}

async fn accept(s: &TestStack, session: &str, token: &str) -> Resp {
    s.post(
        "/v1/invites/accept",
        Some(session),
        json!({ "token": token }),
    )
    .await
}

/// The token in a creation answer's accept URL.
fn token_of(r: &Resp) -> String {
    let url = r.text("accept_url");
    url.split_once("token=")
        .map(|(_, t)| t.to_owned())
        .unwrap_or_else(|| panic!("no token in {url:?}"))
}

fn id_of(r: &Resp) -> Uuid {
    r.body["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no id in {:?}", r.body))
}

fn statuses(list: &Resp) -> Vec<(String, String)> {
    list.body
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| (i.text("email").to_owned(), i.text("status").to_owned()))
        .collect()
}

fn email() -> String {
    format!("invitee-{}@example.com", Uuid::new_v4().simple())
}

/// Move an invite's expiry into the past (a checked query).
async fn expire(s: &TestStack, id: Uuid) {
    let n = sqlx::query!(
        "UPDATE identity.invites SET expires_at = now() - interval '1 second' WHERE id = $1",
        id,
    )
    .execute(&s.db)
    .await
    .expect("expire the invite")
    .rows_affected();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn an_invite_is_created_listed_and_accepted_by_its_email() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("inviter@example.com").await;
    let invitee = email();
    let r = invite(&s, &owner, &org, &invitee.to_uppercase(), "finance").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["email"], invitee, "stored lower case");
    assert_eq!(r.body["role"], "finance");
    assert_eq!(r.body["status"], "pending");
    assert_eq!(r.body["org_id"], org);
    let url = r.body["accept_url"].as_str().expect("an accept_url");
    assert!(
        url.starts_with("https://app.example.com/invites/accept?token=inv_"),
        "built from invites.accept_base_url: {url}"
    );
    let token = token_of(&r);
    assert_eq!(token.len(), 4 + 43, "256 bits");
    let created = time::OffsetDateTime::parse(
        r.text("created_at"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("created_at");
    let expires = time::OffsetDateTime::parse(
        r.text("expires_at"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("expires_at");
    assert_eq!(
        (expires - created).whole_days(),
        7,
        "invites.ttl_secs: 7 days"
    );

    // Listed for admins, never with the token.
    let list = s
        .get(&format!("/v1/organizations/{org}/invites"), Some(&owner))
        .await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert_eq!(statuses(&list), [(invitee.clone(), "pending".to_owned())]);
    assert!(list.body[0].get("accept_url").is_none(), "{:?}", list.body);
    assert!(!list.body.to_string().contains(&token));
    // Stored hashed: the token is nowhere in the row.
    let row = sqlx::query_scalar!(
        r#"SELECT i::text AS "row!" FROM identity.invites i WHERE id = $1"#,
        id_of(&r),
    )
    .fetch_one(&s.db)
    .await
    .expect("the invite row");
    assert!(!row.contains(&token[4..]), "{row}");

    // The invited email accepts; the membership is in the very next /me.
    let session = s.sign_in(&invitee).await;
    let before = s.get("/v1/auth/me", Some(&session)).await;
    assert_eq!(before.body["memberships"], json!([]));
    let a = accept(&s, &session, &token).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["org_id"], org);
    assert_eq!(a.body["role"], "finance");
    assert_eq!(a.body["invite"]["status"], "accepted");
    assert_eq!(a.body["invite"]["id"], r.body["id"]);
    assert!(a.body["invite"].get("accept_url").is_none());
    let me = s.get("/v1/auth/me", Some(&session)).await;
    assert_eq!(
        me.body["memberships"],
        json!([{"org_id": org, "role": "finance"}])
    );
    // The member's org-billing reads follow (its replica learned the membership).
    let wallet = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(&session))
        .await;
    assert_eq!(wallet.status, 200, "{:?}", wallet.body);
    let list = s
        .get(&format!("/v1/organizations/{org}/invites"), Some(&owner))
        .await;
    assert_eq!(statuses(&list), [(invitee.clone(), "accepted".to_owned())]);
    let members = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&owner))
        .await;
    assert!(
        members
            .body
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["email"] == invitee.as_str() && m["role"] == "finance"),
        "{:?}",
        members.body
    );

    // Audited on both sides, without the token or the address.
    let mine = s.get("/v1/audit/me", Some(&owner)).await;
    let created = mine
        .body
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["action"] == "org.invite_created")
        .unwrap_or_else(|| panic!("no org.invite_created in {:?}", mine.body))
        .clone();
    assert_eq!(created["detail"]["invite_id"], r.body["id"]);
    assert_eq!(created["detail"]["role"], "finance");
    let theirs = s.get("/v1/audit/me", Some(&session)).await;
    assert!(
        theirs
            .body
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["action"] == "org.invite_accepted"),
        "{:?}",
        theirs.body
    );
    for log in [&mine, &theirs] {
        for e in log.body.as_array().into_iter().flatten() {
            if e.text("action").starts_with("org.invite_") {
                let text = e.to_string();
                assert!(!text.contains(&token[4..]), "no token: {text}");
                assert!(!text.contains(&invitee), "no address: {text}");
            }
        }
    }
}

#[tokio::test]
async fn who_may_invite_and_what_is_refused() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("refuser@example.com").await;
    let invitee = email();
    // Owner is never a role an invite grants; bad input is 400.
    for (mail, role) in [
        (invitee.as_str(), "owner"),
        (invitee.as_str(), "admin"),
        ("not-an-email", "visitor"),
    ] {
        let r = invite(&s, &owner, &org, mail, role).await;
        assert_eq!(r.status, 400, "{mail} {role}: {:?}", r.body);
    }
    // Admin authority only: a developer is refused, a manager may.
    let developer = s.member(&owner, &org, "developer").await;
    let r = invite(&s, &developer, &org, &invitee, "visitor").await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(
        s.get(
            &format!("/v1/organizations/{org}/invites"),
            Some(&developer)
        )
        .await
        .status,
        403
    );
    let manager = s.member(&owner, &org, "manager").await;
    let r = invite(&s, &manager, &org, &invitee, "manager").await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    // By session only: a manager's API key may list but not invite.
    let key = s.create_key(&owner, &org, Some("manager")).await;
    let key = key.text("token").to_owned();
    let r = invite(&s, &key, &org, &email(), "visitor").await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert!(r.error().contains("session"), "{}", r.error());
    let listed = s
        .get(&format!("/v1/organizations/{org}/invites"), Some(&key))
        .await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    // Another organization's admin: 404 for everything of this one.
    let (stranger, _) = s.org_with_owner("stranger@example.com").await;
    assert_eq!(
        invite(&s, &stranger, &org, &email(), "visitor")
            .await
            .status,
        404
    );
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/invites"), Some(&stranger))
            .await
            .status,
        404
    );
    assert_eq!(
        s.delete(
            &format!("/v1/organizations/{org}/invites/{}", Uuid::new_v4()),
            Some(&stranger)
        )
        .await
        .status,
        404
    );
    // One pending invite per email and organization; none for a member.
    let again = invite(&s, &owner, &org, &invitee, "visitor").await;
    assert_eq!(again.status, 409, "{:?}", again.body);
    let member = invite(&s, &owner, &org, "refuser@example.com", "visitor").await;
    assert_eq!(member.status, 409, "{:?}", member.body);
    assert!(
        member.error().contains("already a member"),
        "{}",
        member.error()
    );
    // The same email may be invited to another organization.
    let (other_owner, other_org) = s.org_with_owner("other-inviter@example.com").await;
    assert_eq!(
        invite(&s, &other_owner, &other_org, &invitee, "visitor")
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn an_invite_is_accepted_once_and_only_by_its_email() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("once@example.com").await;
    let invitee = email();
    let r = invite(&s, &owner, &org, &invitee, "developer").await;
    assert_eq!(r.status, 201);
    let token = token_of(&r);

    let intruder = s.sign_in(&email()).await;
    let wrong = accept(&s, &intruder, &token).await;
    assert_eq!(wrong.status, 403, "{:?}", wrong.body);
    assert_eq!(
        s.get("/v1/auth/me", Some(&intruder)).await.body["memberships"],
        json!([])
    );
    assert_eq!(accept(&s, &intruder, "inv_unknown").await.status, 404);
    let too_long = "x".repeat(300);
    assert_eq!(accept(&s, &intruder, &too_long).await.status, 404);
    // An API key is not a person: the accept route is for sessions.
    let key = s.create_key(&owner, &org, Some("developer")).await;
    let key = key.text("token").to_owned();
    assert_eq!(accept(&s, &key, &token).await.status, 401);

    let session = s.sign_in(&invitee).await;
    assert_eq!(accept(&s, &session, &token).await.status, 200);
    let twice = accept(&s, &session, &token).await;
    assert_eq!(twice.status, 409, "{:?}", twice.body);
    assert!(twice.error().contains("accepted"), "{}", twice.error());
    // An accepted invite cannot be revoked either.
    let revoke = s
        .delete(
            &format!("/v1/organizations/{org}/invites/{}", id_of(&r)),
            Some(&owner),
        )
        .await;
    assert_eq!(revoke.status, 409, "{:?}", revoke.body);
    // A member cannot be invited again.
    assert_eq!(
        invite(&s, &owner, &org, &invitee, "visitor").await.status,
        409
    );
}

#[tokio::test]
async fn revoked_and_expired_invites_cannot_be_accepted() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("revoker@example.com").await;
    let invitee = email();
    let session = s.sign_in(&invitee).await;

    let r = invite(&s, &owner, &org, &invitee, "visitor").await;
    assert_eq!(r.status, 201);
    let path = format!("/v1/organizations/{org}/invites/{}", id_of(&r));
    let revoked = s.delete(&path, Some(&owner)).await;
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    assert_eq!(revoked.body["status"], "revoked");
    assert_eq!(revoked.body["id"], r.body["id"]);
    assert!(revoked.body.get("accept_url").is_none());
    assert_eq!(s.delete(&path, Some(&owner)).await.status, 409);
    let a = accept(&s, &session, &token_of(&r)).await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert!(a.error().contains("revoked"), "{}", a.error());
    // A developer cannot revoke; an unknown invite is 404.
    let developer = s.member(&owner, &org, "developer").await;
    let again = invite(&s, &owner, &org, &invitee, "visitor").await;
    assert_eq!(again.status, 201, "a revoked invite frees the email");
    let again_path = format!("/v1/organizations/{org}/invites/{}", id_of(&again));
    assert_eq!(s.delete(&again_path, Some(&developer)).await.status, 403);
    assert_eq!(
        s.delete(
            &format!("/v1/organizations/{org}/invites/{}", Uuid::new_v4()),
            Some(&owner)
        )
        .await
        .status,
        404
    );

    // Past its expiry an invite reads expired at once and cannot be accepted.
    expire(&s, id_of(&again)).await;
    let list = s
        .get(&format!("/v1/organizations/{org}/invites"), Some(&owner))
        .await;
    assert_eq!(
        statuses(&list),
        [
            (invitee.clone(), "expired".to_owned()),
            (invitee.clone(), "revoked".to_owned())
        ]
    );
    let a = accept(&s, &session, &token_of(&again)).await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert!(a.error().contains("expired"), "{}", a.error());
    assert_eq!(s.delete(&again_path, Some(&owner)).await.status, 409);
    assert_eq!(
        s.get("/v1/auth/me", Some(&session)).await.body["memberships"],
        json!([])
    );

    // The sweep writes the state; a new invite to the email may be made.
    let third = invite(&s, &owner, &org, &email(), "visitor").await;
    expire(&s, id_of(&third)).await;
    identity::sweep::run_once(&s.identity_pool().await, 86400)
        .await
        .expect("sweep");
    let stored = sqlx::query_scalar!(
        "SELECT status FROM identity.invites WHERE id = $1",
        id_of(&third),
    )
    .fetch_one(&s.db)
    .await
    .expect("the invite");
    assert_eq!(stored, "expired");
    let fresh = invite(&s, &owner, &org, &invitee, "finance").await;
    assert_eq!(fresh.status, 201, "{:?}", fresh.body);
    assert_eq!(accept(&s, &session, &token_of(&fresh)).await.status, 200);
}

#[tokio::test]
async fn pending_invites_and_memberships_are_bounded() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[invites]\nmax_pending_per_org = 2\n[auth]\nmax_memberships_per_user = 1\n"
            .to_owned(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("bounded@example.com").await;
    let first = invite(&s, &owner, &org, &email(), "visitor").await;
    assert_eq!(first.status, 201);
    let busy = email();
    let second = invite(&s, &owner, &org, &busy, "visitor").await;
    assert_eq!(second.status, 201);
    let third = invite(&s, &owner, &org, &email(), "visitor").await;
    assert_eq!(third.status, 409, "{:?}", third.body);
    assert!(third.error().contains("maximum of 2"), "{}", third.error());
    // A revoked (or expired) invite no longer counts.
    let path = format!("/v1/organizations/{org}/invites/{}", id_of(&first));
    assert_eq!(s.delete(&path, Some(&owner)).await.status, 200);
    assert_eq!(
        invite(&s, &owner, &org, &email(), "visitor").await.status,
        201
    );
    // The membership cap holds for accepting as for adding.
    let busy_session = s.sign_in(&busy).await;
    let own = s.create_org(&busy_session, "Busy", "TR").await;
    assert_eq!(own.status, 201, "{:?}", own.body);
    let a = accept(&s, &busy_session, &token_of(&second)).await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert!(a.error().contains("maximum of 1"), "{}", a.error());
}

#[tokio::test]
async fn two_accepts_at_once_make_one_membership() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("racer@example.com").await;
    let invitee = email();
    let r = invite(&s, &owner, &org, &invitee, "developer").await;
    let token = token_of(&r);
    let (a, b) = (s.sign_in(&invitee).await, s.sign_in(&invitee).await);
    let (x, y) = tokio::join!(accept(&s, &a, &token), accept(&s, &b, &token));
    let mut got = [x.status, y.status];
    got.sort_unstable();
    assert_eq!(got, [200, 409], "{:?} / {:?}", x.body, y.body);
    let n = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM identity.memberships m JOIN identity.users u
             ON u.id = m.user_id WHERE u.email = $1"#,
        invitee,
    )
    .fetch_one(&s.db)
    .await
    .expect("count");
    assert_eq!(n, 1);
}

#[tokio::test]
async fn invites_sent_are_rate_limited_and_revoking_does_not_give_them_back() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[invites]\nper_org_per_hour = 4\nper_email_per_hour = 2\n".to_owned(),
        ..Default::default()
    })
    .await;
    let (owner, org) = s.org_with_owner("sender@example.com").await;
    // One address: invited, revoked, invited, revoked: the third is refused.
    let target = email();
    for _ in 0..2 {
        let r = invite(&s, &owner, &org, &target, "visitor").await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        let path = format!("/v1/organizations/{org}/invites/{}", id_of(&r));
        assert_eq!(s.delete(&path, Some(&owner)).await.status, 200);
    }
    let third = invite(&s, &owner, &org, &target, "visitor").await;
    assert_eq!(third.status, 429, "{:?}", third.body);
    assert!(
        third.error().starts_with("too many invites"),
        "{}",
        third.error()
    );
    // The refused one did not count: the organization has sent 2 of its 4.
    for _ in 0..2 {
        assert_eq!(
            invite(&s, &owner, &org, &email(), "visitor").await.status,
            201
        );
    }
    let over = invite(&s, &owner, &org, &email(), "visitor").await;
    assert_eq!(over.status, 429, "{:?}", over.body);
}
