//! The ledger writer's limits: amounts at the edges of i64, staff checks before
//! bodies, and no credit applied after its caller gave up.
//!
//! No assertion here depends on how fast the machine is: a wallet is released
//! on a positive marker (every answer in, a batch seen waiting on the lock),
//! and "nothing else was applied" is read only after a later credit through
//! the same writer has committed (one writer, in order: whatever was queued
//! before it has committed or been dropped by then).

use serde_json::json;
use std::time::Duration;
use tests_e2e::{eventually, StackOptions, TestStack};

const NOT_APPLIED: &str = "the wallet is busy: the credit was not applied; retry";

async fn ledger_rows(s: &TestStack, org: &str) -> i64 {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM org_billing.wallet_transactions WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("ledger rows")
}

/// The sum of `org`'s ledger rows.
async fn ledger_sum(s: &TestStack, org: &str) -> i64 {
    sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(delta_minor), 0)::bigint AS "v!" FROM org_billing.wallet_transactions
         WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("sum")
}

/// Wait until a query of the stack's database waits on a lock (a batch
/// blocked on a held wallet).
async fn until_lock_wait(s: &TestStack) {
    let waiting = eventually(Duration::from_secs(20), || async {
        let n: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "v!" FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'"#,
        )
        .fetch_one(&s.db)
        .await
        .expect("the query");
        (n > 0).then_some(())
    })
    .await;
    assert!(waiting.is_some(), "a batch waits on the held wallet");
}

/// A later credit of `amount` through the same writer, sent to org-billing
/// directly (no gateway deadline, so it waits its turn), retried while the
/// wallet is busy. Once it is answered 200, whatever was queued before it
/// has committed or been dropped.
async fn later_credit(s: &TestStack, staff: &str, org: &str, amount: i64) {
    let path = format!("/v1/organizations/{org}/wallet/credit");
    for _ in 0..10 {
        let r = s
            .internal_call(
                s.service_url("org_billing"),
                "POST",
                &path,
                staff,
                json!({ "amount_minor": amount }),
            )
            .await;
        if r.status == 200 {
            return;
        }
        assert_eq!((r.status, r.error()), (503, NOT_APPLIED), "{:?}", r.body);
    }
    panic!("the later credit was not applied in 10 tries");
}

/// Hold `org`'s wallet row lock (as a long keyed credit or another replica
/// would) until the returned transaction ends.
async fn hold_wallet(s: &TestStack, org: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut tx = s.db.begin().await.expect("begin");
    sqlx::query!(
        r#"SELECT 1 AS "one!" FROM org_billing.wallets WHERE org_id = $1::uuid FOR UPDATE"#,
        uuid::Uuid::parse_str(org).expect("a uuid"),
    )
    .fetch_optional(&mut *tx)
    .await
    .expect("lock");
    tx
}

#[tokio::test]
async fn amounts_at_the_edges_of_i64_are_400s_with_exact_messages() {
    let s = TestStack::spawn().await;
    let (_, org) = s.org_with_owner("edges@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/credit");
    let too_big =
        "amount_minor must be a non-zero integer of at most 1000000000000000 in absolute value";
    for amount in [i64::MIN, i64::MIN + 1, i64::MAX, 1_000_000_000_000_001] {
        let r = s
            .post(&path, Some(&staff), json!({"amount_minor": amount}))
            .await;
        assert_eq!((r.status, r.error()), (400, too_big), "{amount}");
    }
    // A wallet near the largest balance (set by hand: 9,223 credits of the
    // largest amount would get there too).
    let r = s
        .post(&path, Some(&staff), json!({"amount_minor": 1}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    sqlx::query!(
        "UPDATE org_billing.wallets SET balance_minor = $2 WHERE org_id = $1::uuid",
        uuid::Uuid::parse_str(&org).expect("a uuid"),
        i64::MAX - 10,
    )
    .execute(&s.db)
    .await
    .expect("near max");
    let overflow = "amount_minor would take the balance past the largest amount a wallet holds";
    let r = s
        .post(&path, Some(&staff), json!({"amount_minor": 11}))
        .await;
    assert_eq!((r.status, r.error()), (400, overflow));
    let keyed = s
        .call(
            "POST",
            &format!("{}{path}", s.core()),
            Some(&staff),
            Some(json!({"amount_minor": 1_000_000_000_000_000i64})),
            &[("idempotency-key", "edge-1")],
        )
        .await;
    assert_eq!((keyed.status, keyed.error()), (400, overflow));
    let fits = s
        .post(&path, Some(&staff), json!({"amount_minor": 10}))
        .await;
    assert_eq!(fits.body["balance_minor"], i64::MAX);
    assert_eq!(ledger_rows(&s, &org).await, 2);
}

#[tokio::test]
async fn callers_who_are_not_staff_get_403_whatever_the_body() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("notstaff@example.com").await;
    for path in [
        format!("/v1/organizations/{org}/wallet/credit"),
        format!("/v1/organizations/{org}/tokens/grant"),
    ] {
        for body in [
            json!({"amount_minor": i64::MIN}),
            json!({"amount": "lots"}),
            json!([1, 2, 3]),
            json!({"amount_minor": 10}),
        ] {
            let r = s.post(&path, Some(&owner), body.clone()).await;
            assert_eq!((r.status, r.error()), (403, "staff only"), "{path} {body}");
        }
        let r = s
            .call(
                "POST",
                &format!("{}{path}", s.core()),
                Some(&owner),
                None,
                &[("content-type", "application/json")],
            )
            .await;
        assert_eq!(r.status, 403, "{path} without a body");
    }
}

#[tokio::test]
async fn a_credit_answered_504_by_the_gateway_is_never_applied() {
    // The gateway gives up after 1 s. Each batch holds one move and waits on
    // the held wallet until Postgres cancels it (400 ms). The wallet is
    // released as soon as every credit has its answer (so none can be a 200):
    // a move still in a batch then, one that entered it too late for its
    // caller, would commit after its answer.
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml:
            "[ledger]\nwriters = 1\nmax_batch = 1\nbatch_timeout_ms = 400\nqueue_timeout_ms = 60000\n"
                .into(),
        gateway_toml: "[proxy]\nupstream_timeout_ms = 1000\n".into(),
        ..Default::default()
    })
    .await;
    let (_, org) = s.org_with_owner("gaveup@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/credit");
    let held = hold_wallet(&s, &org).await;
    // Distinct powers of two: the ledger's sum says exactly which applied.
    let credits = (0..8).map(|i| {
        let (path, staff, s) = (path.clone(), staff.clone(), &s);
        async move {
            let r = s
                .post(&path, Some(&staff), json!({"amount_minor": 1i64 << i}))
                .await;
            (1i64 << i, r.status)
        }
    });
    let answers = futures::future::join_all(credits).await;
    held.rollback().await.expect("release");
    assert!(answers.iter().all(|(_, st)| *st != 200), "{answers:?}");
    // After a later credit (1 << 8) committed, the ledger holds that one only:
    // no credit answered before the release was applied after it.
    later_credit(&s, &staff, &org, 1 << 8).await;
    assert_eq!(
        ledger_sum(&s, &org).await,
        1 << 8,
        "only the later credit is in the ledger: {answers:?}"
    );
    assert_eq!(ledger_rows(&s, &org).await, 1);
}

#[tokio::test]
async fn a_move_past_its_queue_deadline_is_dropped_unapplied() {
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml:
            "[ledger]\nwriters = 1\nbatch_timeout_ms = 4000\nqueue_timeout_ms = 300\n".into(),
        ..Default::default()
    })
    .await;
    let (_, org) = s.org_with_owner("deadline@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/credit");
    let held = hold_wallet(&s, &org).await;
    let first = s.post(&path, Some(&staff), json!({"amount_minor": 100}));
    // Sent once the first's batch waits on the wallet: it queues behind that
    // batch, which lasts until Postgres cancels it (4 s), far past the
    // second's queue deadline (300 ms).
    let second = async {
        until_lock_wait(&s).await;
        s.post(&path, Some(&staff), json!({"amount_minor": 7}))
            .await
    };
    tokio::pin!(first, second);
    // The wallet is released as soon as either is answered: a move still
    // queued then and taken into a batch despite its deadline would commit.
    let (first, second) = tokio::select! {
        a = &mut first => {
            held.rollback().await.expect("release");
            (a, second.await)
        }
        b = &mut second => {
            held.rollback().await.expect("release");
            (first.await, b)
        }
    };
    // The batch was cancelled by the statement timeout; the queued move had
    // passed its deadline by then and was dropped.
    assert_eq!((first.status, first.error()), (503, NOT_APPLIED));
    assert_eq!((second.status, second.error()), (503, NOT_APPLIED));
    later_credit(&s, &staff, &org, 1000).await;
    assert_eq!(ledger_sum(&s, &org).await, 1000, "only the later credit");
    assert_eq!(ledger_rows(&s, &org).await, 1);
}

#[tokio::test]
async fn a_held_wallet_stalls_its_shard_no_longer_than_the_batch_timeout() {
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml: "[ledger]\nwriters = 1\nbatch_timeout_ms = 1000\n".into(),
        ..Default::default()
    })
    .await;
    let (_, stuck) = s.org_with_owner("stuck@example.com").await;
    let (_, other) = s.org_with_owner("other@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let held = hold_wallet(&s, &stuck).await;
    let stuck_path = format!("/v1/organizations/{stuck}/wallet/credit");
    let blocked = s.post(&stuck_path, Some(&staff), json!({"amount_minor": 1}));
    // Sent once the stuck batch waits on the wallet: queued behind it.
    let behind = async {
        until_lock_wait(&s).await;
        s.credit(&staff, &other, 2).await
    };
    let (blocked, behind) = tokio::join!(blocked, behind);
    // The stuck batch was cancelled by its statement timeout (1 s) ...
    assert_eq!(
        (blocked.status, blocked.error()),
        (503, NOT_APPLIED),
        "{:?}",
        blocked.body
    );
    // ... and the credit behind it served while the wallet is still held
    // (released only below): a shard stalled until then would have left it
    // to the gateway's 504.
    assert_eq!(behind.status, 200, "{:?}", behind.body);
    held.rollback().await.expect("release");
    assert_eq!(ledger_rows(&s, &stuck).await, 0);
    assert_eq!(ledger_rows(&s, &other).await, 1);
}

/// A TCP relay to Postgres that can be frozen (bytes stop flowing both ways,
/// connections stay open), as a hung network would. Returns its port.
async fn freezable_relay(
    target: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pump(cr, sw, frozen.clone()));
            tokio::spawn(pump(sr, cw, frozen.clone()));
        }
    });
    port
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Frozen: hold the bytes (and the connection) for as long as it lasts.
        while frozen.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn a_hung_writer_connection_stalls_its_shard_no_longer_than_the_batch_limit() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let frozen = std::sync::Arc::new(AtomicBool::new(false));
    let pg_port = reqwest::Url::parse(&tests_e2e::admin_database_url())
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(5432);
    let relay = freezable_relay(pg_port, frozen.clone()).await;
    let s = TestStack::spawn_with(StackOptions {
        org_billing_toml: "[ledger]\nwriters = 1\nbatch_timeout_ms = 1000\n\
                           ping_if_idle_ms = 600000\n[database]\nacquire_timeout_ms = 1000\n"
            .into(),
        org_billing_database_port: Some(relay),
        ..Default::default()
    })
    .await;
    let (_, org) = s.org_with_owner("hung@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/credit");
    let first = s
        .post(&path, Some(&staff), json!({"amount_minor": 1}))
        .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    // The network to Postgres hangs: the writer gives up on its connection
    // after the batch limit (1 s + 300 ms) instead of waiting for TCP.
    frozen.store(true, Ordering::SeqCst);
    let hung = s
        .post(&path, Some(&staff), json!({"amount_minor": 2}))
        .await;
    // An outage: 503 with Retry-After, saying the outcome is not known:
    // org-billing's own answer once the writer gave up on its connection (a
    // writer waiting for TCP would have left it to the gateway's 504).
    assert_eq!(hung.status, 503, "outcome unknown: {:?}", hung.body);
    assert!(hung.error().contains("not known"), "{:?}", hung.body);
    assert!(
        hung.headers.get("retry-after").is_some(),
        "{:?}",
        hung.headers
    );
    // The next batch waits for a new connection no longer than the connect
    // timeout: no connection at all, nothing was sent, so not applied (503,
    // org-billing's answer, not the gateway's).
    let next = s
        .post(&path, Some(&staff), json!({"amount_minor": 4}))
        .await;
    assert_eq!(
        (next.status, next.error()),
        (503, NOT_APPLIED),
        "{:?}",
        next.body
    );
    // The network is back: the shard serves again.
    frozen.store(false, Ordering::SeqCst);
    let back = s
        .post(&path, Some(&staff), json!({"amount_minor": 8}))
        .await;
    assert_eq!(back.status, 200, "{:?}", back.body);
}
