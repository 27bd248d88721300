use futures::future::join_all;
use serde_json::json;
use std::time::Duration;
use tests_e2e::Json;
use tests_e2e::{eventually, StackOptions, TestStack};

async fn balance_and_ledger_sum(s: &TestStack, org: &str) -> (i64, i64, i64) {
    let r = sqlx::query!(
        r#"SELECT w.balance_minor,
                  COALESCE((SELECT sum(delta_minor)::bigint FROM org_billing.wallet_transactions t
                             WHERE t.org_id = w.org_id), 0) AS "sum!",
                  (SELECT count(*) FROM org_billing.wallet_transactions t
                    WHERE t.org_id = w.org_id) AS "rows!"
             FROM org_billing.wallets w WHERE w.org_id = $1::uuid"#,
        uuid::Uuid::parse_str(org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .expect("ledger query");
    (r.balance_minor, r.sum, r.rows)
}

/// Ledger rows of `org` whose balance_after is not the running sum of the rows
/// up to it (in id order) or is negative; -1 if the query fails.
async fn chain_breaks(s: &TestStack, org: &str) -> i64 {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "v!" FROM (SELECT balance_after, sum(delta_minor) OVER (ORDER BY id) AS running
         FROM org_billing.wallet_transactions WHERE org_id = $1::uuid) q
         WHERE balance_after <> running OR balance_after < 0"#,
        uuid::Uuid::parse_str(org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await
    .unwrap_or(-1)
}

#[tokio::test]
async fn staff_credits_and_corrections_move_the_balance_through_the_ledger() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("payer@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let credit = |amount: i64, note: &str| {
        let body = json!({"amount_minor": amount, "note": note});
        let path = format!("/v1/organizations/{org}/wallet/credit");
        let staff = staff.clone();
        let s = &s;
        async move { s.post(&path, Some(&staff), body).await }
    };
    let r = credit(150_000, "EFT ref 42").await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["balance_minor"], 150_000);
    assert_eq!(r.body["currency"], "TRY");
    let r = credit(-50_000, "duplicate transfer").await;
    assert_eq!(r.body["balance_minor"], 100_000);
    let r = credit(-100_001, "too much").await;
    assert_eq!(
        (r.status, r.error()),
        (409, "the balance would go below zero")
    );
    assert_eq!(credit(0, "").await.status, 400);
    assert_eq!(
        s.post(
            &format!("/v1/organizations/{org}/wallet/credit"),
            Some(&staff),
            json!({"amount_minor": 1.5})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        s.post(
            &format!("/v1/organizations/{org}/wallet/credit"),
            Some(&staff),
            json!({"note": "x"})
        )
        .await
        .status,
        400
    );
    let missing = uuid::Uuid::new_v4();
    assert_eq!(s.credit(&staff, &missing.to_string(), 5).await.status, 404);

    let w = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(&owner))
        .await;
    assert_eq!(w.body["balance_minor"], 100_000);
    let txs = s
        .get(
            &format!("/v1/organizations/{org}/wallet/transactions"),
            Some(&owner),
        )
        .await;
    assert_eq!(txs.status, 200);
    let rows = txs.array("");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["delta_minor"], -50_000);
    assert_eq!(rows[0]["kind"], "correction");
    assert_eq!(rows[0]["note"], "duplicate transfer");
    assert_eq!(rows[1]["delta_minor"], 150_000);
    assert_eq!(rows[1]["kind"], "bank_transfer");
    assert!(rows[0]["id"].as_i64() > rows[1]["id"].as_i64());
    let (balance, sum, _) = balance_and_ledger_sum(&s, &org).await;
    assert_eq!((balance, sum), (100_000, 100_000));
}

#[tokio::test]
async fn the_transaction_list_holds_the_last_hundred() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("many@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    for i in 1..=105 {
        let r = s
            .post(
                &format!("/v1/organizations/{org}/wallet/credit"),
                Some(&staff),
                json!({"amount_minor": i}),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    let txs = s
        .get(
            &format!("/v1/organizations/{org}/wallet/transactions"),
            Some(&owner),
        )
        .await;
    let rows = txs.array("");
    assert_eq!(rows.len(), 100);
    assert_eq!(rows[0]["delta_minor"], 105);
    assert_eq!(rows[99]["delta_minor"], 6);
}

#[tokio::test]
async fn concurrent_credits_and_debits_lose_nothing_and_never_go_negative() {
    let s = TestStack::spawn().await;
    let (_, org) = s.org_with_owner("hot@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    // 200 requests at once: credits of 100 and debits of 150, interleaved.
    let deltas: Vec<i64> = (0..200)
        .map(|i| if i % 3 == 0 { 100 } else { -150 })
        .collect();
    let results = join_all(deltas.iter().map(|d| {
        let path = format!("/v1/organizations/{org}/wallet/credit");
        let staff = staff.clone();
        let s = &s;
        let d = *d;
        async move {
            (
                d,
                s.post(&path, Some(&staff), json!({"amount_minor": d}))
                    .await
                    .status,
            )
        }
    }))
    .await;
    let accepted: Vec<i64> = results
        .iter()
        .filter(|(_, st)| *st == 200)
        .map(|(d, _)| *d)
        .collect();
    let refused = results.iter().filter(|(_, st)| *st == 409).count();
    assert_eq!(
        accepted.len() + refused,
        200,
        "every request is accepted or refused: {results:?}"
    );
    assert!(accepted.iter().any(|d| *d < 0), "some debits were accepted");
    let (balance, sum, rows) = balance_and_ledger_sum(&s, &org).await;
    assert_eq!(
        rows as usize,
        accepted.len(),
        "one ledger row per accepted request"
    );
    assert_eq!(balance, sum, "the balance equals the sum of its rows");
    assert_eq!(balance, accepted.iter().sum::<i64>(), "no request lost");
    assert!(balance >= 0);
    // Every row's running balance is consistent and never negative.
    let bad = chain_breaks(&s, &org).await;
    assert_eq!(bad, 0);
}

#[tokio::test]
async fn credits_waiting_for_a_busy_wallet_are_checked_one_by_one_in_order() {
    let s = TestStack::spawn().await;
    let (_, org) = s.org_with_owner("batch@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/credit");
    assert_eq!(
        s.post(&path, Some(&staff), json!({"amount_minor": 60}))
            .await
            .status,
        200
    );
    // Hold the wallet's row lock so that the debits queue up behind it.
    let mut lock = s.db.begin().await.expect("begin");
    sqlx::query!(
        r#"SELECT 1 AS "one!" FROM org_billing.wallets WHERE org_id = $1::uuid FOR UPDATE"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_optional(&mut *lock)
    .await
    .expect("lock");
    // Each debit names itself in its note: its answer must be its own row.
    let debits = join_all((0..20).map(|i| {
        s.post(
            &path,
            Some(&staff),
            json!({"amount_minor": -5, "note": format!("debit {i}")}),
        )
    }));
    let release = async {
        // Once the first debit waits on the lock, the rest queue behind it.
        let waiting = eventually(Duration::from_secs(10), || async {
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
        tokio::time::sleep(Duration::from_millis(1000)).await;
        lock.commit().await.expect("release");
        waiting
    };
    let (results, waiting) = tokio::join!(debits, release);
    assert!(waiting.is_some(), "a debit waited on the wallet's lock");
    let statuses: Vec<u16> = results.iter().map(|r| r.status).collect();
    // Whatever the order, 60 covers exactly twelve debits of 5.
    assert_eq!(
        statuses.iter().filter(|st| **st == 200).count(),
        12,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|st| **st == 409).count(),
        8,
        "{statuses:?}"
    );
    let refused = results.iter().find(|r| r.status == 409).expect("a refusal");
    assert_eq!(refused.body["error"], "the balance would go below zero");
    let ids: Vec<i64> = results
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.body["transaction_id"].as_i64().expect("transaction_id"))
        .collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        12,
        "each accepted debit has its own row: {ids:?}"
    );
    let (balance, sum, rows) = balance_and_ledger_sum(&s, &org).await;
    assert_eq!((balance, sum, rows), (0, 0, 13));
    // The answers name the balance after each debit: 55, 50, ..., 0 once each.
    let mut afters: Vec<i64> = results
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.body["balance_minor"].as_i64().expect("balance"))
        .collect();
    afters.sort_unstable();
    assert_eq!(afters, (0..12).map(|i| i * 5).collect::<Vec<_>>());
    // Rows chain in id order: each debit was checked against the balance
    // the one before it left, however many shared a transaction (how many
    // did depends on how fast the debits reached the writer, so it is not
    // asserted here: the properties are the sums, each debit once, the order).
    let chain: Vec<(i64, i64, i64, String)> = sqlx::query!(
        r#"SELECT id AS "c0!", delta_minor AS "c1!", balance_after AS "c2!", note AS "c3!" FROM org_billing.wallet_transactions
         WHERE org_id = $1::uuid ORDER BY id"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_all(&s.db)
    .await.map(|v| v.into_iter().map(|r| (r.c0, r.c1, r.c2, r.c3)).collect::<Vec<_>>())
    .expect("chain query");
    assert_eq!(chain_breaks(&s, &org).await, 0);
    assert_eq!(
        chain
            .iter()
            .map(|(_, _, after, _)| *after)
            .collect::<Vec<_>>(),
        (0..13).map(|i| 60 - 5 * i).collect::<Vec<_>>(),
        "60, then 55, 50, ..., 0 in id order: {chain:?}"
    );
    // Each accepted debit was answered with its own row (its note) and the
    // balance after it; a refused one has no row.
    let mut answered: Vec<(i64, i64, String)> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == 200)
        .map(|(i, r)| {
            (
                r.body["transaction_id"].as_i64().unwrap_or(-1),
                r.body["balance_minor"].as_i64().unwrap_or(-1),
                format!("debit {i}"),
            )
        })
        .collect();
    answered.sort_unstable();
    assert_eq!(
        answered,
        chain
            .iter()
            .filter(|(_, delta, _, _)| *delta < 0)
            .map(|(id, _, after, note)| (*id, *after, note.clone()))
            .collect::<Vec<_>>()
    );
    // Every accepted debit's audit event reaches the actor's history.
    let audited = eventually(Duration::from_secs(10), || async {
        let audit = s.get("/v1/audit/me", Some(&staff)).await;
        let credited: Vec<serde_json::Value> = audit
            .array("")
            .into_iter()
            .filter(|e| e["action"] == "wallet.credited")
            .collect();
        (credited.len() == 13).then_some(credited)
    })
    .await
    .expect("13 wallet.credited events in the audit history");
    // Each names the ledger row it created and the balance after it.
    let mut named: Vec<(i64, i64)> = audited
        .iter()
        .map(|e| {
            (
                e["detail"]["transaction_id"].as_i64().unwrap_or(-1),
                e["detail"]["balance_after_minor"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    named.sort_unstable();
    let mut rows: Vec<(i64, i64)> = sqlx::query!(
        r#"SELECT id AS "c0!", balance_after AS "c1!" FROM org_billing.wallet_transactions WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_all(&s.db)
    .await.map(|v| v.into_iter().map(|r| (r.c0, r.c1)).collect::<Vec<_>>())
    .expect("rows");
    rows.sort_unstable();
    assert_eq!(named, rows);
}

#[tokio::test]
async fn keyed_and_batched_credits_on_one_wallet_interleave_without_loss() {
    let s = TestStack::spawn().await;
    let (_, org) = s.org_with_owner("mixed@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let url = format!("{}/v1/organizations/{org}/wallet/credit", s.core());
    // 120 at once: every other one carries its own Idempotency-Key (its own
    // transaction), the rest go through group commit; credits of 50, debits of 70.
    let results = join_all((0..120).map(|i| {
        let (url, staff, s) = (url.clone(), staff.clone(), &s);
        async move {
            let d: i64 = if i % 2 == 0 { 50 } else { -70 };
            let key = format!("mixed-{i}");
            let headers: Vec<(&str, &str)> = if i % 4 < 2 {
                vec![("idempotency-key", key.as_str())]
            } else {
                vec![]
            };
            let r = s
                .call(
                    "POST",
                    &url,
                    Some(&staff),
                    Some(json!({"amount_minor": d})),
                    &headers,
                )
                .await;
            (d, r.status)
        }
    }))
    .await;
    let accepted: Vec<i64> = results
        .iter()
        .filter(|(_, st)| *st == 200)
        .map(|(d, _)| *d)
        .collect();
    assert!(
        results.iter().all(|(_, st)| *st == 200 || *st == 409),
        "{results:?}"
    );
    let (balance, sum, rows) = balance_and_ledger_sum(&s, &org).await;
    assert_eq!(rows as usize, accepted.len());
    assert_eq!(balance, sum);
    assert_eq!(balance, accepted.iter().sum::<i64>());
    let bad = chain_breaks(&s, &org).await;
    assert_eq!(bad, 0, "the running balance chains through both paths");
}

#[tokio::test]
async fn a_writer_whose_connection_went_away_reconnects() {
    let s = TestStack::spawn_with(StackOptions {
        // Ping the held connection before every batch.
        org_billing_toml: "[ledger]\nping_if_idle_ms = 0\n".into(),
        ..Default::default()
    })
    .await;
    let (_, org) = s.org_with_owner("reconnect@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/credit");
    let credit = || s.post(&path, Some(&staff), json!({"amount_minor": 5}));
    assert_eq!(credit().await.status, 200);
    let killed = s.end_connections("org-billing-ledger").await;
    assert!(killed >= 1, "the writer held a connection");
    let again = credit().await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(again.body["balance_minor"], 10);
    let (balance, sum, rows) = balance_and_ledger_sum(&s, &org).await;
    assert_eq!((balance, sum, rows), (10, 10, 2));
}

#[tokio::test]
async fn staff_see_an_empty_list_for_a_new_wallet_and_404_for_no_organization() {
    let s = TestStack::spawn().await;
    let (_, org) = s.org_with_owner("fresh@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let fresh = s
        .get(
            &format!("/v1/organizations/{org}/wallet/transactions"),
            Some(&staff),
        )
        .await;
    assert_eq!((fresh.status, fresh.body.clone()), (200, json!([])));
    let missing = uuid::Uuid::new_v4();
    let r = s
        .get(
            &format!("/v1/organizations/{missing}/wallet/transactions"),
            Some(&staff),
        )
        .await;
    assert_eq!((r.status, r.error()), (404, "not found"));
}

#[tokio::test]
async fn the_sweep_forgets_old_idempotency_keys_only() {
    let s = TestStack::spawn().await;
    let insert = |key: &'static str, age_secs: f64| {
        sqlx::query!(
            "INSERT INTO org_billing.idempotency_keys (scope, key, request_hash, created_at) \
             VALUES ('test', $1, '\\x00', now() - make_interval(secs => $2))",
            key,
            age_secs,
        )
        .execute(&s.db)
    };
    insert("old", 8.0 * 86400.0).await.expect("old key");
    insert("new", 60.0).await.expect("new key");
    let options = (*s.db.connect_options())
        .clone()
        .options([("search_path", "org_billing")]);
    let pool = sqlx::PgPool::connect_with(options).await.expect("pool");
    let deleted = org_billing::sweep_once(&pool, 7 * 86400)
        .await
        .expect("sweep");
    assert_eq!(deleted, 1);
    let left: Vec<String> =
        sqlx::query_scalar!("SELECT key FROM org_billing.idempotency_keys WHERE scope = 'test'")
            .fetch_all(&s.db)
            .await
            .expect("keys");
    assert_eq!(left, ["new"]);
}

#[tokio::test]
async fn both_ledgers_are_append_only() {
    let s = TestStack::spawn().await;
    let (_, org) = s.org_with_owner("ledger@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let credit = s.credit(&staff, &org, 10).await;
    assert_eq!(credit.status, 200);
    let grant = s.grant(&staff, &org, 10).await;
    assert_eq!(grant.status, 200);
    for (table, op, sql) in [
        (
            "wallet_transactions",
            "UPDATE",
            "UPDATE org_billing.wallet_transactions SET delta_minor = 1000",
        ),
        (
            "wallet_transactions",
            "DELETE",
            "DELETE FROM org_billing.wallet_transactions",
        ),
        (
            "token_transactions",
            "UPDATE",
            "UPDATE org_billing.token_transactions SET delta = 1000",
        ),
        (
            "token_transactions",
            "DELETE",
            "DELETE FROM org_billing.token_transactions",
        ),
    ] {
        // Runtime strings: each statement of the list must be refused.
        let err = sqlx::query(sql)
            .execute(&s.db)
            .await
            .expect_err("the trigger refuses it");
        // The trigger's own refusal, not some other error (a typo, a missing table).
        assert!(
            err.to_string()
                .contains(&format!("ledger rows are append-only ({op} on {table})")),
            "{sql}: {err}"
        );
    }
    let rows: (i64, i64) = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM org_billing.wallet_transactions) AS "c0!", (SELECT count(*) FROM org_billing.token_transactions) AS "c1!""#,
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .expect("counts");
    assert_eq!(rows, (1, 1));
}

#[tokio::test]
async fn idempotency_keys_make_retries_return_the_first_result() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("idem@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let url = format!("{}/v1/organizations/{org}/wallet/credit", s.core());
    let send = |key: &'static str, amount: i64| {
        let (url, staff) = (url.clone(), staff.clone());
        let s = &s;
        async move {
            s.call(
                "POST",
                &url,
                Some(&staff),
                Some(json!({"amount_minor": amount, "note": "wire"})),
                &[("idempotency-key", key)],
            )
            .await
        }
    };
    let first = send("transfer-001", 5_000).await;
    assert_eq!(first.status, 200);
    let retry = send("transfer-001", 5_000).await;
    assert_eq!((retry.status, &retry.body), (200, &first.body));
    // Ten concurrent retries of a new key apply once.
    let burst = join_all((0..10).map(|_| send("transfer-002", 700))).await;
    assert!(burst.iter().all(|r| r.status == 200));
    assert!(burst.iter().all(|r| r.body == burst[0].body));
    let w = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(&owner))
        .await;
    assert_eq!(w.body["balance_minor"], 5_700);
    // The same key with another request is refused; a refusal is replayed too.
    let other = send("transfer-001", 9_999).await;
    assert_eq!(other.status, 422);
    let refused = send("correction-1", -1_000_000).await;
    assert_eq!(refused.status, 409);
    send("transfer-003", 2_000_000).await;
    let again = send("correction-1", -1_000_000).await;
    assert_eq!((again.status, &again.body), (409, &refused.body));
    let bad_key = s
        .call(
            "POST",
            &url,
            Some(&staff),
            Some(json!({"amount_minor": 1})),
            &[("idempotency-key", "")],
        )
        .await;
    assert_eq!(bad_key.status, 400);
    let (balance, sum, rows) = balance_and_ledger_sum(&s, &org).await;
    assert_eq!((balance, sum, rows), (2_005_700, 2_005_700, 3));

    // Token grants take keys too.
    let grant = format!("{}/v1/organizations/{org}/tokens/grant", s.core());
    for _ in 0..3 {
        let r = s
            .call(
                "POST",
                &grant,
                Some(&staff),
                Some(json!({"amount": 50, "reason": "promo"})),
                &[("idempotency-key", "grant-1")],
            )
            .await;
        assert_eq!(r.body["balance"], 50);
    }
}

#[tokio::test]
async fn ai_tokens_are_granted_by_staff_and_spent_never_below_zero() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("tokens@example.com").await;
    let visitor = s.member(&owner, &org, "visitor").await;
    let staff = s.sign_in("staff@example.com").await;
    let t = s
        .get(&format!("/v1/organizations/{org}/tokens"), Some(&visitor))
        .await;
    assert_eq!((t.status, &t.body["balance"]), (200, &json!(0)));
    let g = s
        .post(
            &format!("/v1/organizations/{org}/tokens/grant"),
            Some(&staff),
            json!({"amount": 1000, "reason": "welcome"}),
        )
        .await;
    assert_eq!((g.status, &g.body["balance"]), (200, &json!(1000)));
    assert_eq!(s.grant(&staff, &org, 0).await.status, 400);
    assert_eq!(s.grant(&staff, &org, -5).await.status, 400);

    let path = format!("/internal/v1/organizations/{org}/tokens/spend");
    let spend = s
        .internal_call(
            s.service_url("org_billing"),
            "POST",
            &path,
            &visitor,
            json!({"amount": 400, "reason": "chat"}),
        )
        .await;
    assert_eq!((spend.status, &spend.body["balance"]), (200, &json!(600)));
    let over = s
        .internal_call(
            s.service_url("org_billing"),
            "POST",
            &path,
            &visitor,
            json!({"amount": 601, "reason": "chat"}),
        )
        .await;
    assert_eq!(
        (over.status, over.error()),
        (402, "the organization has not enough AI tokens")
    );
    let outsider = s.sign_in("outsider@example.com").await;
    let foreign = s
        .internal_call(
            s.service_url("org_billing"),
            "POST",
            &path,
            &outsider,
            json!({"amount": 1}),
        )
        .await;
    assert_eq!(foreign.status, 404);
    // Not reachable through the gateway, and tokens never touch the wallet.
    assert_eq!(
        s.post(&path, Some(&visitor), json!({"amount": 1}))
            .await
            .status,
        404
    );
    let t = s
        .get(&format!("/v1/organizations/{org}/tokens"), Some(&owner))
        .await;
    assert_eq!(t.body["balance"], 600);
    assert_eq!(
        s.get(&format!("/v1/organizations/{org}/wallet"), Some(&owner))
            .await
            .body["balance_minor"],
        0
    );
    let (sum, rows): (i64, i64) = sqlx::query!(
        r#"SELECT COALESCE(sum(delta), 0)::bigint AS "c0!", count(*) AS "c1!" FROM org_billing.token_transactions WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .unwrap_or((-1, -1));
    assert_eq!((sum, rows), (600, 2));
}

#[tokio::test]
async fn every_state_change_shows_in_the_actors_audit_history() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("audit-owner@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    s.add_member(&owner, &org, "someone@example.com", "developer")
        .await;
    s.add_member(&owner, &org, "someone@example.com", "finance")
        .await;
    let key = s.create_key(&owner, &org, Some("visitor")).await;
    let key_id = key.text("/key/id").to_owned();
    s.delete(
        &format!("/v1/organizations/{org}/api-keys/{key_id}"),
        Some(&owner),
    )
    .await;
    s.credit(&staff, &org, 10).await;
    s.grant(&staff, &org, 10).await;
    let actions_of = |token: String| {
        let s = &s;
        async move {
            let log = s.get("/v1/audit/me", Some(&token)).await;
            log.array("")
                .iter()
                .map(|e| e.text("action").to_owned())
                .collect::<Vec<_>>()
        }
    };
    let want_owner = [
        "org.created",
        "org.member_added",
        "org.member_role_changed",
        "org.api_key_created",
        "org.api_key_revoked",
    ];
    let got = eventually(Duration::from_secs(10), || async {
        let a = actions_of(owner.clone()).await;
        want_owner
            .iter()
            .all(|w| a.iter().any(|x| x == w))
            .then_some(a)
    })
    .await;
    assert!(
        got.is_some(),
        "owner's history: {:?}",
        actions_of(owner.clone()).await
    );
    let got = eventually(Duration::from_secs(10), || async {
        let a = actions_of(staff.clone()).await;
        (a.iter().any(|x| x == "wallet.credited") && a.iter().any(|x| x == "tokens.granted"))
            .then_some(a)
    })
    .await;
    assert!(
        got.is_some(),
        "staff history: {:?}",
        actions_of(staff.clone()).await
    );
}

#[tokio::test]
async fn concurrent_spends_never_pass_the_members_limit_or_the_balance() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("spender-owner@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    assert_eq!(s.grant(&staff, &org, 1000).await.status, 200);
    let dev = s.member(&owner, &org, "developer").await;
    let dev_id = s
        .get("/v1/auth/me", Some(&dev))
        .await
        .text("user_id")
        .to_owned();
    let path = format!("/v1/organizations/{org}/members/{dev_id}/ai");
    let set = eventually(Duration::from_secs(10), || async {
        let r = s
            .patch(&path, Some(&owner), json!({"token_limit": 50}))
            .await;
        (r.status == 200).then_some(r)
    })
    .await
    .expect("the limit is set");
    assert_eq!(set.body["token_limit"], 50);
    // 20 spends of 10 at once, through the group commit: exactly 5 fit.
    let spend = format!("/internal/v1/organizations/{org}/tokens/spend");
    let answers = join_all((0..20).map(|_| {
        s.internal_call(
            s.service_url("org_billing"),
            "POST",
            &spend,
            &dev,
            json!({"amount": 10, "reason": "race"}),
        )
    }))
    .await;
    let ok = answers.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&str> = answers
        .iter()
        .filter(|r| r.status == 402)
        .map(|r| r.error())
        .collect();
    assert_eq!((ok, refused.len()), (5, 15));
    assert!(refused
        .iter()
        .all(|e| *e == "your personal AI-token limit in this organization is exhausted"));
    let after = s.get(&path, Some(&dev)).await;
    assert_eq!(after.body["tokens_spent"], 50);
    let t = s
        .get(&format!("/v1/organizations/{org}/tokens"), Some(&owner))
        .await;
    assert_eq!(t.body["balance"], 950);
    let (sum, spends): (i64, i64) = sqlx::query!(
        r#"SELECT COALESCE(sum(delta), 0)::bigint AS "c0!", count(*) FILTER (WHERE kind = 'spend') AS "c1!"  FROM org_billing.token_transactions WHERE org_id = $1::uuid"#,
        uuid::Uuid::parse_str(&org).expect("a uuid"),
    )
    .fetch_one(&s.db)
    .await.map(|r| (r.c0, r.c1))
    .unwrap_or((-1, -1));
    assert_eq!((sum, spends), (950, 5));
    // The owner has no personal limit: the organization's balance is the bound.
    let big = s
        .internal_call(
            s.service_url("org_billing"),
            "POST",
            &spend,
            &owner,
            json!({"amount": 951}),
        )
        .await;
    assert_eq!(
        (big.status, big.error()),
        (402, "the organization has not enough AI tokens")
    );
    // AI disabled: 403, nothing spent.
    let off = s
        .patch(&path, Some(&owner), json!({"ai_enabled": false}))
        .await;
    assert_eq!(off.status, 200);
    let denied = s
        .internal_call(
            s.service_url("org_billing"),
            "POST",
            &spend,
            &dev,
            json!({"amount": 1}),
        )
        .await;
    assert_eq!(denied.status, 403);
    assert_eq!(s.get(&path, Some(&dev)).await.body["tokens_spent"], 50);
}

/// Follow `path`'s pages of `limit` (the `x-next-cursor` header) to the end:
/// every page's ids, in order.
async fn pages(s: &TestStack, token: &str, path: &str, limit: i64) -> Vec<Vec<i64>> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let r = s
            .get(
                &format!("{path}{sep}limit={limit}&cursor={cursor}"),
                Some(token),
            )
            .await;
        assert_eq!(r.status, 200, "{path}: {:?}", r.body);
        out.push(r.array("").iter().map(|e| e.int("id")).collect());
        match r.headers.get("x-next-cursor") {
            Some(c) => cursor = c.to_str().expect("ascii").to_owned(),
            None => return out,
        }
        assert!(out.len() < 20, "{path}: pages never end");
    }
}

#[tokio::test]
async fn wallet_transactions_and_the_audit_history_reach_older_entries_by_cursor() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("pages@example.com").await;
    let staff = s.sign_in("staff@example.com").await;
    let path = format!("/v1/organizations/{org}/wallet/transactions");
    for n in 1..=5 {
        let r = s
            .post(
                &format!("/v1/organizations/{org}/wallet/credit"),
                Some(&staff),
                json!({"amount_minor": n, "note": format!("credit {n}")}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    // No parameters: every row (up to 100), newest first, no next page.
    let all = s.get(&path, Some(&owner)).await;
    let ids: Vec<i64> = all.array("").iter().map(|e| e.int("id")).collect();
    assert_eq!(ids.len(), 5, "{:?}", all.body);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    assert!(all.headers.get("x-next-cursor").is_none());
    // Two at a time: the same rows, in order, over three pages.
    let paged = pages(&s, &owner, &path, 2).await;
    assert_eq!(paged.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!(paged.concat(), ids);
    // What is not a cursor or a limit of this API: 400.
    for q in [
        "limit=0",
        "limit=101",
        "cursor=nope",
        "limit=2&cursor=bm9wZQ",
    ] {
        let r = s.get(&format!("{path}?{q}"), Some(&owner)).await;
        assert_eq!(r.status, 400, "{q}: {:?}", r.body);
    }

    // The audit history pages the same way: once the five credits arrived
    // (from org-billing, by event), the whole history page by page.
    let newest = eventually(Duration::from_secs(20), || async {
        let r = s.get("/v1/audit/me", Some(&staff)).await;
        let credits = r
            .array("")
            .iter()
            .filter(|e| e["subject"] == format!("org:{org}").as_str())
            .count();
        (credits >= 5).then(|| r.array("").iter().map(|e| e.int("id")).collect::<Vec<_>>())
    })
    .await
    .expect("the credits in the staff member's history");
    let audit = pages(&s, &staff, "/v1/audit/me", 2).await;
    assert_eq!(audit.concat(), newest);
    assert!(audit.len() >= 3, "{audit:?}");
    let r = s.get("/v1/audit/me?cursor=nope", Some(&staff)).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
}
