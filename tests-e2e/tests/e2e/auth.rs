use futures::future::join_all;
use serde_json::json;
use tests_e2e::{random_ip, StackOptions, TestStack};

#[tokio::test]
async fn request_link_then_verify_signs_a_user_in() {
    let s = TestStack::spawn().await;
    let link = s.request_link_from("Ada@Example.com", "203.0.113.5").await;
    assert_eq!(link.status, 200);
    assert_eq!(link.body["status"], "sent");
    let dev = link.body["dev_token"]
        .as_str()
        .expect("dev token echoed in dev config");
    let v = s.verify_from(dev, "203.0.113.5").await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    let session = v.body["session_token"].as_str().expect("session token");
    assert!(
        session.len() >= 43,
        "a session token carries at least 256 bits"
    );

    let me = s.get("/v1/auth/me", Some(session)).await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["email"], "ada@example.com");
    assert_eq!(me.body["name"], "");
    assert_eq!(me.body["staff"], false);
    assert_eq!(me.body["memberships"], json!([]));
    assert!(uuid::Uuid::parse_str(me.text("user_id")).is_ok());
    // Exactly the Identity fields, nothing internal.
    let keys: Vec<&String> = me.body.as_object().expect("an object").keys().collect();
    assert_eq!(keys.len(), 5, "{keys:?}");
    assert!(me.headers.get("x-hub-credential-kind").is_none());
}

#[tokio::test]
async fn request_link_answers_the_same_for_new_and_existing_accounts() {
    let s = TestStack::spawn_with(StackOptions {
        identity_toml: "[auth]\necho_dev_token = false\n".into(),
        ..Default::default()
    })
    .await;
    s.db_exec("INSERT INTO users (id, email) VALUES (gen_random_uuid(), 'known@example.com')")
        .await;
    let known = s.request_link_from("known@example.com", &random_ip()).await;
    let unknown = s
        .request_link_from("nobody@example.com", &random_ip())
        .await;
    assert_eq!(known.status, 200);
    assert_eq!(unknown.status, 200);
    assert_eq!(known.body, unknown.body);
    assert_eq!(
        known.body,
        json!({"status": "sent"}),
        "no dev_token unless configured"
    );
}

#[tokio::test]
async fn request_link_refuses_invalid_emails() {
    let s = TestStack::spawn().await;
    for bad in [
        "",
        "not-an-email",
        "a@b",
        "x@@y.com",
        &format!("{}@x.com", "a".repeat(260)),
    ] {
        let r = s.request_link_from(bad, &random_ip()).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.body);
        assert!(!r.error().is_empty());
    }
    let missing = s.post("/v1/auth/request-link", None, json!({})).await;
    assert_eq!(missing.status, 400);
}

#[tokio::test]
async fn magic_link_tokens_are_single_use() {
    let s = TestStack::spawn().await;
    let ip = random_ip();
    let link = s.request_link_from("once@example.com", &ip).await;
    let dev = link.text("dev_token").to_owned();
    assert_eq!(s.verify_from(&dev, &ip).await.status, 200);
    let again = s.verify_from(&dev, &ip).await;
    assert_eq!(again.status, 401);
    assert_eq!(again.error(), "invalid, expired or already used token");
}

#[tokio::test]
async fn unknown_and_expired_magic_links_are_refused() {
    let s = TestStack::spawn().await;
    let ip = random_ip();
    assert_eq!(s.verify_from("mlt_doesnotexist", &ip).await.status, 401);
    assert_eq!(s.verify_from(&"x".repeat(5000), &ip).await.status, 401);
    let link = s.request_link_from("late@example.com", &ip).await;
    assert_eq!(link.status, 200, "{:?}", link.body);
    let dev = link.body["dev_token"]
        .as_str()
        .unwrap_or_else(|| panic!("a dev token: {:?}", link.body))
        .to_owned();
    s.db_exec("UPDATE magic_links SET expires_at = now() - interval '1 second'")
        .await;
    let r = s.verify_from(&dev, &ip).await;
    assert_eq!(
        (r.status, r.error()),
        (401, "invalid, expired or already used token")
    );
}

#[tokio::test]
async fn magic_links_live_fifteen_minutes_and_sessions_thirty_days() {
    let s = TestStack::spawn().await;
    let token = s.sign_in("ttl@example.com").await;
    let (link_secs, session_secs): (f64, f64) = sqlx::query!(
        r#"SELECT (SELECT EXTRACT(EPOCH FROM expires_at - created_at)::float8 FROM identity.magic_links) AS "c0!", (SELECT EXTRACT(EPOCH FROM expires_at - created_at)::float8 FROM identity.sessions) AS "c1!""#,
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .expect("query");
    assert!((link_secs - 900.0).abs() < 5.0, "{link_secs}");
    assert!(
        (session_secs - 30.0 * 86400.0).abs() < 5.0,
        "{session_secs}"
    );
    assert!(!token.is_empty());
}

#[tokio::test]
async fn concurrent_verifies_of_one_token_have_exactly_one_winner() {
    let s = TestStack::spawn().await;
    let link = s.request_link_from("race@example.com", &random_ip()).await;
    let dev = link.text("dev_token").to_owned();
    // Distinct client IPs so that the per-IP verify limit is not what stops them.
    let attempts = join_all((0..12).map(|_| {
        let dev = dev.clone();
        let s = &s;
        async move { s.verify_from(&dev, &random_ip()).await.status }
    }))
    .await;
    assert_eq!(
        attempts.iter().filter(|&&c| c == 200).count(),
        1,
        "{attempts:?}"
    );
    assert_eq!(
        attempts.iter().filter(|&&c| c == 401).count(),
        11,
        "{attempts:?}"
    );
    let sessions: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM identity.sessions"#)
        .fetch_one(&s.db)
        .await
        .unwrap_or(-1);
    assert_eq!(sessions, 1);
}

#[tokio::test]
async fn request_link_is_limited_to_five_per_hour_per_email() {
    let s = TestStack::spawn().await;
    // A new address: the limit holds whether or not the account existed.
    for i in 0..5 {
        let r = s
            .request_link_from("limited@example.com", &random_ip())
            .await;
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = s
        .request_link_from("limited@example.com", &random_ip())
        .await;
    assert_eq!(r.status, 429);
    let other = s.request_link_from("other@example.com", &random_ip()).await;
    assert_eq!(other.status, 200, "other addresses are not affected");
    // The same body as the per-IP limit (checked in the next test).
    assert_eq!(
        r.body,
        json!({"error": "too many requests, try again later"})
    );
    // The window is an hour: 59 minutes on, still refused; past the hour, free.
    s.clock.advance(time::Duration::minutes(59));
    let r = s
        .request_link_from("limited@example.com", &random_ip())
        .await;
    assert_eq!(r.status, 429, "the hour is not over");
    s.clock.advance(time::Duration::minutes(2));
    let r = s
        .request_link_from("limited@example.com", &random_ip())
        .await;
    assert_eq!(r.status, 200, "a new hour: {:?}", r.body);
}

#[tokio::test]
async fn request_link_is_limited_to_twenty_per_hour_per_ip() {
    let s = TestStack::spawn().await;
    let ip = random_ip();
    for i in 0..20 {
        let r = s.request_link_from(&format!("u{i}@example.com"), &ip).await;
        assert_eq!(r.status, 200, "request {i}");
    }
    let r = s.request_link_from("u20@example.com", &ip).await;
    assert_eq!(r.status, 429);
    assert_eq!(
        r.body,
        json!({"error": "too many requests, try again later"})
    );
    s.clock.advance(time::Duration::minutes(61));
    assert_eq!(
        s.request_link_from("u21@example.com", &ip).await.status,
        200,
        "the IP's hour is over"
    );
    assert_eq!(
        s.request_link_from("u20@example.com", &random_ip())
            .await
            .status,
        200
    );
    // The refused request issued no token.
    let links: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM identity.magic_links m JOIN identity.users u ON u.id = m.user_id WHERE u.email = 'u20@example.com'"#,
    )
    .fetch_one(&s.db)
    .await
    .unwrap_or(-1);
    assert_eq!(links, 1);
}

#[tokio::test]
async fn verify_is_limited_to_fifteen_per_minute_per_ip() {
    let s = TestStack::spawn().await;
    let ip = random_ip();
    for i in 0..15 {
        assert_eq!(
            s.verify_from("mlt_wrong", &ip).await.status,
            401,
            "attempt {i}"
        );
    }
    // Even a valid token is refused from this IP now.
    let link = s.request_link_from("slow@example.com", &random_ip()).await;
    let dev = link.text("dev_token").to_owned();
    let r = s.verify_from(&dev, &ip).await;
    assert_eq!(
        (r.status, r.body.clone()),
        (429, json!({"error": "too many requests, try again later"}))
    );
    // The window is a minute from the first attempt (counted from its
    // recorded time, not from now: however long the attempts took).
    let first: time::OffsetDateTime = sqlx::query_scalar!(
        r#"SELECT min(at) AS "v!" FROM identity.rate_limit_hits WHERE bucket = 'verify:ip:' || $1"#,
        &ip,
    )
    .fetch_one(&s.db)
    .await
    .expect("the first attempt");
    let until = |at: time::OffsetDateTime| {
        let ahead = at - s.clock.now();
        if ahead.is_positive() {
            s.clock.advance(ahead);
        }
    };
    until(first + time::Duration::seconds(50));
    assert_eq!(s.verify_from(&dev, &ip).await.status, 429);
    until(first + time::Duration::seconds(65));
    let wrong = s.verify_from("mlt_wrong", &ip).await;
    assert_eq!(
        (wrong.status, wrong.body),
        (
            401,
            json!({"error": "invalid, expired or already used token"})
        )
    );
    assert_eq!(s.verify_from(&dev, &ip).await.status, 200);
}

#[tokio::test]
async fn ipv6_clients_are_limited_per_64() {
    let s = TestStack::spawn().await;
    // One host rotating through its /64 is one client.
    for i in 0..15 {
        let ip = format!("2001:db8:7:9:{i:x}::1");
        assert_eq!(s.verify_from("mlt_wrong", &ip).await.status, 401, "{ip}");
    }
    assert_eq!(
        s.verify_from("mlt_wrong", "2001:db8:7:9:ffff::2")
            .await
            .status,
        429
    );
    assert_eq!(
        s.verify_from("mlt_wrong", "2001:db8:7:a::1").await.status,
        401,
        "the next /64 is another client"
    );
}

#[tokio::test]
async fn staff_emails_carry_the_staff_flag() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in("Staff@Example.com").await;
    let user = s.sign_in("user@example.com").await;
    assert_eq!(s.get("/v1/auth/me", Some(&staff)).await.body["staff"], true);
    assert_eq!(s.get("/v1/auth/me", Some(&user)).await.body["staff"], false);
}

#[tokio::test]
async fn tokens_are_stored_only_as_sha256_hashes() {
    let s = TestStack::spawn().await;
    let ip = random_ip();
    let link = s.request_link_from("hash@example.com", &ip).await;
    let dev = link.text("dev_token").to_owned();
    let session = s
        .verify_from(&dev, &ip)
        .await
        .text("session_token")
        .to_owned();
    let sha = |t: &str| {
        ring::digest::digest(&ring::digest::SHA256, t.as_bytes())
            .as_ref()
            .to_vec()
    };
    let (owner, org) = s.org_with_owner("hash-owner@example.com").await;
    let key = s
        .create_key(&owner, &org, None)
        .await
        .text("token")
        .to_owned();
    assert!(key.starts_with("svc_live_"));
    let link_hash: Vec<u8> = sqlx::query_scalar!("SELECT token_hash FROM identity.magic_links")
        .fetch_one(&s.db)
        .await
        .expect("magic link row");
    let session_hash: Vec<u8> = sqlx::query_scalar!(
        "SELECT token_hash FROM identity.sessions s JOIN identity.users u ON u.id = s.user_id \
         WHERE u.email = 'hash@example.com'",
    )
    .fetch_one(&s.db)
    .await
    .expect("session row");
    let key_hash: Vec<u8> = sqlx::query_scalar!("SELECT token_hash FROM identity.api_keys")
        .fetch_one(&s.db)
        .await
        .expect("key row");
    assert_eq!(link_hash, sha(&dev));
    assert_eq!(session_hash, sha(&session));
    assert_eq!(key_hash, sha(&key));
    // No column of any table in either schema holds a plaintext: every table
    // as JSON (every column, whatever its type), searched for each token.
    let tables: Vec<(String, String)> = sqlx::query!(
        r#"SELECT table_schema::text AS "c0!", table_name::text AS "c1!" FROM information_schema.tables
         WHERE table_schema IN ('identity', 'org_billing') AND table_type = 'BASE TABLE'"#,
    )
    .fetch_all(&s.db)
    .await.map(|v| v.into_iter().map(|r| (r.c0, r.c1)).collect::<Vec<_>>())
    .expect("tables");
    assert!(tables.len() >= 10, "{tables:?}");
    for (schema, table) in tables {
        // A runtime string: the table is named by the loop (every table).
        let dump: String = sqlx::query_scalar(&format!(
            "SELECT COALESCE(string_agg(row_to_json(t)::text, ' '), '') FROM \"{schema}\".\"{table}\" t"
        ))
        .fetch_one(&s.db)
        .await
        .unwrap_or_else(|e| panic!("{schema}.{table}: {e}"));
        for (what, secret) in [("magic link", &dev), ("session", &session), ("key", &key)] {
            assert!(
                !dump.contains(secret.as_str()),
                "{schema}.{table} holds a {what} token"
            );
        }
    }
}

#[tokio::test]
async fn me_needs_a_valid_bearer() {
    let s = TestStack::spawn().await;
    let none = s.get("/v1/auth/me", None).await;
    assert_eq!((none.status, none.error()), (401, "missing bearer token"));
    let bogus = s.get("/v1/auth/me", Some("sess_bogus")).await;
    assert_eq!(bogus.status, 401);
    let basic = s
        .call(
            "GET",
            &format!("{}/v1/auth/me", s.core()),
            None,
            None,
            &[("authorization", "Basic abc")],
        )
        .await;
    assert_eq!(basic.status, 401);
}

#[tokio::test]
async fn expired_sessions_are_refused() {
    let s = TestStack::spawn().await;
    let token = s.sign_in("expired@example.com").await;
    s.db_exec("UPDATE sessions SET expires_at = now() - interval '1 second'")
        .await;
    assert_eq!(s.get("/v1/auth/me", Some(&token)).await.status, 401);
    assert_eq!(s.get("/v1/profile", Some(&token)).await.status, 401);
}

#[tokio::test]
async fn the_sweep_deletes_dead_tokens_and_sessions() {
    let s = TestStack::spawn().await;
    let live = s.sign_in("live@example.com").await;
    let _dead = s.sign_in("dead@example.com").await;
    s.db_exec(
        "UPDATE sessions SET expires_at = now() - interval '30 days' \
         WHERE user_id = (SELECT id FROM users WHERE email = 'dead@example.com')",
    )
    .await;
    s.db_exec("UPDATE magic_links SET expires_at = now() - interval '30 days'")
        .await;
    let pool = s.identity_pool().await;
    let deleted = identity::sweep::run_once(&pool, 86400)
        .await
        .expect("sweep");
    assert!(deleted >= 3, "{deleted}");
    let (links, sessions): (i64, i64) = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM identity.magic_links) AS "c0!", (SELECT count(*) FROM identity.sessions) AS "c1!""#,
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .unwrap_or((-1, -1));
    assert_eq!((links, sessions), (0, 1));
    assert_eq!(s.get("/v1/auth/me", Some(&live)).await.status, 200);
}
