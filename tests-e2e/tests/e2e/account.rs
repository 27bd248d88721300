//! A user's own personal data (issue 35): the export of everything the
//! platform holds about them (identity's part and the agent's, merged by the
//! gateway) and the deletion of their account (refused while they are an
//! organization's only owner; sessions and keys revoked at once; identity's
//! personal fields erased; the agent erases memory and conversations).

use serde_json::json;
use std::time::Duration;
use tests_e2e::{eventually, TestStack};
use uuid::Uuid;

const ALICE: &str = "alice-account@example.com";
const BOB: &str = "bob-account@example.com";
const SOUL: &str = "Call me Captain; I keep the ledgers of Ankara.";
const SAID: &str = "what is my wallet balance, please-7781";

#[tokio::test]
async fn a_user_exports_their_data_and_deletes_their_account() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("staff@example.com").await;
    let (alice, org) = s.org_with_owner(ALICE).await;
    let r = s.add_member(&alice, &org, BOB, "manager").await;
    assert!(r.status == 200 || r.status == 201, "{:?}", r.body);
    let bob = s.sign_in(BOB).await;
    let bob_id = s
        .get("/v1/auth/me", Some(&bob))
        .await
        .text("user_id")
        .to_owned();
    let key = s.create_key(&bob, &org, Some("developer")).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    let key = key.text("token").to_owned();
    // What the assistant keeps of Bob: his soul, a conversation, a proposal.
    let r = s
        .patch("/v1/memory/soul", Some(&bob), json!({"soul_md": SOUL}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s
        .post(
            "/v1/agent",
            Some(&bob),
            json!({"message": SAID, "org_id": org}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = s
        .post(
            "/v1/proposals",
            Some(&bob),
            json!({"title": "Darker ledgers", "problem": "Too bright.", "proposal": "Dim it."}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);

    // The export: a session only.
    assert_eq!(s.get("/v1/auth/me/export", None).await.status, 401);
    let r = s.get("/v1/auth/me/export", Some(&key)).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    let e = s.get("/v1/auth/me/export", Some(&bob)).await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    assert_eq!(e.body["profile"]["email"], BOB);
    assert_eq!(e.body["profile"]["user_id"], bob_id.as_str());
    assert_eq!(e.body["memberships"][0]["org_id"], org.as_str());
    assert_eq!(e.body["memberships"][0]["role"], "manager");
    assert!(!e.array("sessions").is_empty());
    assert_eq!(e.array("api_keys_created").len(), 1);
    assert!(
        e.array("audit")
            .iter()
            .any(|a| a["action"] == "org.api_key_created"),
        "{:?}",
        e.body["audit"]
    );
    // The agent's part, merged.
    assert_eq!(e.body["memory"]["soul_md"], SOUL);
    let conversations = e.array("conversations");
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    assert!(conversations[0]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .any(|m| m["role"] == "user" && m["content"] == SAID));
    assert_eq!(e.body["proposals"][0]["title"], "Darker ledgers");
    // Never a credential.
    let text = e.body.to_string();
    assert!(
        !text.contains(&bob) && !text.contains(&key),
        "a token in the export"
    );
    assert!(!text.contains("token_hash"), "a hash in the export");

    // Alice is her organization's only owner: she cannot leave it ownerless.
    let r = s.delete("/v1/auth/me", Some(&alice)).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains(&org), "{:?}", r.body);
    assert_eq!(s.get("/v1/auth/me", Some(&alice)).await.status, 200);
    assert_eq!(s.delete("/v1/auth/me", Some(&key)).await.status, 401);

    // An activity batch of the agent in flight when he deletes it: it checked
    // for his tombstone before the erasure and commits after it. The erasure
    // waits for it (and so erases what it wrote).
    let bob_uuid = Uuid::parse_str(&bob_id).expect("a uuid");
    let mut batch = s.db.begin().await.expect("a transaction");
    sqlx::query!(
        "SELECT pg_advisory_xact_lock_shared($1)",
        agent::store::erasure::ERASURE_LOCK
    )
    .execute(&mut *batch)
    .await
    .expect("the writers' lock");
    sqlx::query!(
        "INSERT INTO agent.activity (event_id, user_id, action, subject, at) \
         VALUES ($1, $2, 'wallet.topped_up', 'in flight', now())",
        Uuid::new_v4(),
        bob_uuid,
    )
    .execute(&mut *batch)
    .await
    .expect("the batch's row");

    // Bob deletes his account.
    let d = s.delete("/v1/auth/me", Some(&bob)).await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    // The erasure has come to the batch: it waits on the lock (or, were the
    // two not ordered, it has already committed its tombstone).
    let reached = eventually(Duration::from_secs(20), || async {
        let reached: i64 = sqlx::query_scalar!(
            r#"SELECT (SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                        WHERE l.locktype = 'advisory' AND NOT l.granted
                          AND d.datname = current_database())
                    + (SELECT count(*) FROM agent.erased_users WHERE user_id = $1) AS "n!""#,
            bob_uuid,
        )
        .fetch_one(&s.db)
        .await
        .expect("the locks");
        (reached > 0).then_some(())
    })
    .await;
    assert!(reached.is_some(), "the agent never began the erasure");
    batch.commit().await.expect("the batch commits");
    assert_eq!(d.body["status"], "deleted");
    assert_eq!(d.body["memberships_ended"], 1);
    assert_eq!(d.body["api_keys_revoked"], 1);
    // Nothing of his resolves any more, through either host.
    assert_eq!(s.get("/v1/auth/me", Some(&bob)).await.status, 401);
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}"), Some(&key))
            .await
            .status,
        401
    );
    let via_product = s
        .call(
            "GET",
            &format!("{}/core-api/v1/auth/me", s.product()),
            Some(&key),
            None,
            &[],
        )
        .await;
    assert_eq!(via_product.status, 401);
    // He is no longer a member.
    let members = s
        .get(&format!("/v1/organizations/{org}/members"), Some(&alice))
        .await;
    assert!(
        !members.body.to_string().contains(&bob_id),
        "{:?}",
        members.body
    );
    // Identity keeps a pseudonym: no address, no name, disabled.
    let u = s
        .get(&format!("/v1/admin/users/{bob_id}"), Some(&staff))
        .await;
    assert_eq!(u.status, 200, "{:?}", u.body);
    assert_eq!(u.body["email"], format!("deleted-{bob_id}@deleted.invalid"));
    assert_eq!(u.body["name"], "");
    assert_eq!(u.body["status"], "disabled");
    // For good: staff cannot enable it, and no one can sign in or be added
    // under the pseudonym.
    let r = s
        .post(
            &format!("/v1/admin/users/{bob_id}/enable"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    let pseudonym = format!("deleted-{bob_id}@deleted.invalid");
    let r = s.add_member(&alice, &org, &pseudonym, "visitor").await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let ips: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM identity.audit_log WHERE actor_user_id = $1 AND ip <> ''"#,
        Uuid::parse_str(&bob_id).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("the count");
    assert_eq!(ips, 0, "the IPs of his audit entries are erased");
    // The agent erases what it kept of him (memory, conversations); his
    // proposal stays, under the pseudonymous id.
    let erased = eventually(Duration::from_secs(20), || async {
        let left: i64 = sqlx::query_scalar!(
            r#"SELECT (SELECT count(*) FROM agent.conversations WHERE user_id = $1)
                    + (SELECT count(*) FROM agent.memory_docs WHERE user_id = $1)
                    + (SELECT count(*) FROM agent.activity WHERE user_id = $1) AS "n!""#,
            Uuid::parse_str(&bob_id).expect("a uuid"),
        )
        .fetch_one(&s.db)
        .await
        .expect("the count");
        (left == 0).then_some(())
    })
    .await;
    assert!(
        erased.is_some(),
        "the agent never erased the deleted account's data"
    );
    // An audit event of his arriving after the erasure is not learned again:
    // once one of Alice's, published after it, is stored, his is not.
    let session_opened = |user: Uuid| event_contracts::AuditRecorded {
        actor_user_id: Some(hub_domain::UserId::from(user)),
        action: "auth.session_opened".into(),
        subject: format!("user:{user}"),
        detail: json!({}),
        ip: String::new(),
    };
    let late = s.publish(session_opened(bob_uuid)).await;
    let alice_id = s
        .get("/v1/auth/me", Some(&alice))
        .await
        .text("user_id")
        .to_owned();
    let alice_uuid = Uuid::parse_str(&alice_id).expect("a uuid");
    let marker = s.publish(session_opened(alice_uuid)).await;
    let learned = eventually(Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM agent.activity WHERE event_id = $1"#,
            marker
        )
        .fetch_one(&s.db)
        .await
        .expect("the count");
        (n == 1).then_some(())
    })
    .await;
    assert!(learned.is_some(), "the agent never learned Alice's event");
    let his: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM agent.activity WHERE user_id = $1 OR event_id = $2"#,
        bob_uuid,
        late,
    )
    .fetch_one(&s.db)
    .await
    .expect("the count");
    assert_eq!(his, 0, "a deleted account's late audit event was stored");
    let proposals = s.get("/v1/proposals", Some(&staff)).await;
    assert!(proposals.body.to_string().contains("Darker ledgers"));
    // The address is free again: signing in with it makes a new account.
    let again = s.sign_in(BOB).await;
    let me = s.get("/v1/auth/me", Some(&again)).await;
    assert_ne!(me.text("user_id"), bob_id);
    assert_eq!(me.array("memberships").len(), 0);
}
