//! Property tests (issue 16), where they pay most: random interleavings of
//! credits, debits and keyed retries against the ledger; random action
//! sequences against the service-contract lifecycle, compared with its
//! transition table as the contract documents it; and the races at the edge
//! of a limit (30 sign-in links from one address at once, two last owners
//! leaving at once).
//!
//! The proptest cases share one stack (a stack per case would cost seconds
//! each): every case works in an organization of its own. Each runs on a
//! runtime the test owns, so proptest can shrink a failing case.

use crate::servers::{active_server, p_call};
use futures::future::{join_all, FutureExt, LocalBoxFuture};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use tests_e2e::Json;
use tests_e2e::{random_ip, Resp, TestStack};
use uuid::Uuid;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Run `cases` of `strategy` against one stack (with a staff session); a
/// failure panics with the shrunk case.
fn check<S, F>(cases: u32, strategy: S, case: F)
where
    S: Strategy,
    S::Value: Clone + std::fmt::Debug,
    F: for<'a> Fn(
        &'a TestStack,
        &'a str,
        S::Value,
    ) -> LocalBoxFuture<'a, Result<(), TestCaseError>>,
{
    let rt = runtime();
    let s = rt.block_on(TestStack::spawn());
    // Staff signs in once (sign-in links are rate limited per address).
    let staff = rt.block_on(s.sign_in("staff@example.com"));
    let result = runner(cases).run(&strategy, |v| rt.block_on(case(&s, &staff, v)));
    rt.block_on(async move { drop(s) });
    if let Err(e) = result {
        panic!("{e}");
    }
}

// --- the ledger ---------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Move {
    Credit(i64),
    Debit(i64),
}

impl Move {
    fn delta(self) -> i64 {
        match self {
            Move::Credit(a) => a,
            Move::Debit(a) => -a,
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Through group commit (no key).
    Plain(Move),
    /// With an Idempotency-Key of its own (its own transaction).
    Keyed(Move),
    /// The same request again as an earlier keyed one (same key, same body).
    Retry(usize),
}

fn ledger_ops() -> impl Strategy<Value = Vec<Vec<Op>>> {
    let mv = prop_oneof![
        (1i64..400).prop_map(Move::Credit),
        (1i64..600).prop_map(Move::Debit),
    ];
    let op = prop_oneof![
        3 => mv.clone().prop_map(Op::Plain),
        2 => mv.prop_map(Op::Keyed),
        1 => any::<usize>().prop_map(Op::Retry),
    ];
    // Batches sent one after the other; the requests of a batch all at once.
    prop::collection::vec(prop::collection::vec(op, 1..10), 1..6)
}

/// What the database holds for `org`: (balance, sum of the rows, rows, rows
/// whose balance_after is not the running sum in id order or is negative).
async fn books(s: &TestStack, org: &str) -> (i64, i64, i64, i64) {
    let org: Uuid = org.parse().expect("an org id");
    let r = sqlx::query!(
        r#"SELECT w.balance_minor,
                  COALESCE((SELECT sum(delta_minor)::bigint FROM org_billing.wallet_transactions t
                             WHERE t.org_id = w.org_id), 0) AS "sum!",
                  (SELECT count(*) FROM org_billing.wallet_transactions t
                    WHERE t.org_id = w.org_id) AS "rows!",
                  (SELECT count(*) FROM (SELECT balance_after,
                                                sum(delta_minor) OVER (ORDER BY id) AS running
                                           FROM org_billing.wallet_transactions t
                                          WHERE t.org_id = w.org_id) q
                    WHERE balance_after <> running OR balance_after < 0) AS "breaks!"
             FROM org_billing.wallets w WHERE w.org_id = $1"#,
        org
    )
    .fetch_one(&s.db)
    .await
    .expect("the books");
    (r.balance_minor, r.sum, r.rows, r.breaks)
}

async fn ledger_case(
    s: &TestStack,
    staff: &str,
    batches: Vec<Vec<Op>>,
) -> Result<(), TestCaseError> {
    let email = format!("prop-{}@example.com", Uuid::new_v4().simple());
    let (_owner, org) = s.org_with_owner(&email).await;
    let url = format!("{}/v1/organizations/{org}/wallet/credit", s.core());
    // Keyed requests sent so far: key, body, first answer.
    let mut keyed: Vec<(String, Value, (u16, Value))> = Vec::new();
    let (mut accepted, mut rows) = (0i64, 0i64);
    for batch in batches {
        // (key, body, the keyed request it repeats)
        let mut reqs: Vec<(Option<String>, Value, Option<usize>)> = Vec::new();
        for op in &batch {
            match *op {
                Op::Plain(m) | Op::Keyed(m) => {
                    let body = json!({
                        "amount_minor": m.delta(),
                        "note": format!("prop {}", Uuid::new_v4().simple()),
                    });
                    let key = matches!(op, Op::Keyed(_)).then(|| Uuid::new_v4().to_string());
                    reqs.push((key, body, None));
                }
                Op::Retry(i) if !keyed.is_empty() => {
                    let j = i % keyed.len();
                    reqs.push((Some(keyed[j].0.clone()), keyed[j].1.clone(), Some(j)));
                }
                Op::Retry(_) => {}
            }
        }
        let answers: Vec<Resp> = join_all(reqs.iter().map(|(key, body, _)| {
            let url = &url;
            async move {
                let headers: Vec<(&str, &str)> = key
                    .iter()
                    .map(|k| ("idempotency-key", k.as_str()))
                    .collect();
                s.call("POST", url, Some(staff), Some(body.clone()), &headers)
                    .await
            }
        }))
        .await;
        for ((key, body, retry_of), r) in reqs.into_iter().zip(answers) {
            if let Some(j) = retry_of {
                // A replay is the first answer, whatever happened since.
                prop_assert_eq!(&(r.status, r.body.clone()), &keyed[j].2, "replay of {}", j);
                continue;
            }
            let delta = body.int("amount_minor");
            match r.status {
                200 => {
                    accepted += delta;
                    rows += 1;
                    prop_assert!(r.body["balance_minor"].as_i64().is_some_and(|b| b >= 0));
                }
                409 => {
                    prop_assert!(delta < 0, "a credit was refused: {:?}", r.body);
                    prop_assert_eq!(r.error(), "the balance would go below zero");
                }
                other => prop_assert!(false, "answer {other}: {:?}", r.body),
            }
            if let Some(k) = key {
                keyed.push((k, body, (r.status, r.body)));
            }
        }
    }
    let (balance, sum, count, breaks) = books(s, &org).await;
    prop_assert_eq!((balance, sum, count, breaks), (accepted, accepted, rows, 0));
    let wallet = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(staff))
        .await;
    prop_assert_eq!(wallet.body["balance_minor"].as_i64(), Some(accepted));
    Ok(())
}

#[test]
fn ledger_interleavings_keep_the_books() {
    check(16, ledger_ops(), |s, staff, batches| {
        ledger_case(s, staff, batches).boxed_local()
    });
}

// --- the service-contract lifecycle ------------------------------------------

const ACTIONS: [&str; 7] = [
    "stop",
    "start",
    "reboot",
    "suspend",
    "activate",
    "resize",
    "terminate",
];

/// The contract's transition table (proto-docs/service-contract.md), written
/// out here rather than taken from the service: the state after `action` from
/// `state`, or None where the contract refuses it (409).
fn table(state: &str, action: &str) -> Option<&'static str> {
    Some(match (action, state) {
        ("stop", "active") => "stopped",
        ("start", "stopped") => "active",
        ("reboot", "active") => "active",
        ("suspend", "active" | "stopped") => "suspended",
        ("activate", "suspended") => "active",
        ("resize", "active") => "active",
        ("resize", "stopped") => "stopped",
        ("terminate", "active" | "stopped" | "suspended") => "terminated",
        _ => return None,
    })
}

async fn apply(s: &TestStack, token: &str, id: &str, action: &str, plan: &str) -> Resp {
    match action {
        "stop" | "start" | "reboot" => {
            p_call(
                s,
                "POST",
                &format!("/v1/servers/{id}/power"),
                Some(token),
                Some(json!({"action": action})),
            )
            .await
        }
        _ => {
            let body = (action == "resize").then(|| json!({"plan": plan}));
            p_call(
                s,
                "POST",
                &format!("/v1/service-contract/services/{id}/{action}"),
                Some(token),
                body,
            )
            .await
        }
    }
}

async fn contract_case(s: &TestStack, steps: Vec<usize>) -> Result<(), TestCaseError> {
    let email = format!("life-{}@example.com", Uuid::new_v4().simple());
    let host = format!("life-{}", &Uuid::new_v4().simple().to_string()[..8]);
    let (owner, org, id) = active_server(s, &email, &host).await;
    let (mut state, mut plan) = ("active", "vps-small");
    for step in steps {
        let action = ACTIONS[step % ACTIONS.len()];
        let other = if plan == "vps-small" {
            "vps-large"
        } else {
            "vps-small"
        };
        let r = apply(s, &owner, &id, action, other).await;
        match table(state, action) {
            Some(next) => {
                prop_assert_eq!(r.status, 200, "{} from {}: {:?}", action, state, r.body);
                state = next;
                if action == "resize" {
                    plan = other;
                }
            }
            None => {
                prop_assert_eq!(r.status, 409, "{} from {}: {:?}", action, state, r.body);
                let verb = action;
                prop_assert_eq!(
                    r.error(),
                    format!("cannot {verb} a server that is {state}"),
                    "{} from {}",
                    action,
                    state
                );
            }
        }
        let listed = p_call(
            s,
            "GET",
            &format!("/v1/service-contract/services?org_id={org}"),
            Some(&owner),
            None,
        )
        .await;
        let svc = &listed.body[0];
        prop_assert_eq!(
            (svc["state"].as_str(), svc["plan"].as_str()),
            (Some(state), Some(plan)),
            "after {}",
            action
        );
    }
    Ok(())
}

#[test]
fn the_service_contract_follows_its_transition_table() {
    check(
        12,
        prop::collection::vec(0usize..ACTIONS.len(), 1..16),
        |s, _staff, steps| contract_case(s, steps).boxed_local(),
    );
}

// --- races at the edge of a limit -------------------------------------------

#[tokio::test]
async fn thirty_links_at_once_from_one_address_give_exactly_twenty() {
    let s = TestStack::spawn().await;
    let ip = random_ip();
    let all = join_all((0..30).map(|i| {
        let ip = ip.clone();
        let s = &s;
        async move {
            s.request_link_from(&format!("burst{i}@example.com"), &ip)
                .await
        }
    }))
    .await;
    let ok = all.iter().filter(|r| r.status == 200).count();
    let limited = all.iter().filter(|r| r.status == 429).count();
    assert_eq!(
        (ok, limited),
        (20, 10),
        "{:?}",
        all.iter().map(|r| r.status).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn two_last_owners_leaving_at_once_leave_one_owner() {
    let s = TestStack::spawn().await;
    for round in 0..8 {
        let (first, org) = s
            .org_with_owner(&format!(
                "pair{round}-{}@example.com",
                Uuid::new_v4().simple()
            ))
            .await;
        let second = s.member(&first, &org, "owner").await;
        let mut ids = Vec::new();
        for t in [&first, &second] {
            let me = s.get("/v1/auth/me", Some(t)).await;
            ids.push(me.text("user_id").to_owned());
        }
        let leave: Vec<String> = ids
            .iter()
            .map(|id| format!("/v1/organizations/{org}/members/{id}"))
            .collect();
        let (a, b) = tokio::join!(
            s.delete(&leave[0], Some(&first)),
            s.delete(&leave[1], Some(&second)),
        );
        let mut statuses = [a.status, b.status];
        statuses.sort_unstable();
        assert_eq!(
            statuses,
            [200, 409],
            "round {round}: {:?} {:?}",
            a.body,
            b.body
        );
        let refused = if a.status == 409 { &a } else { &b };
        assert_eq!(
            refused.error(),
            "the last owner cannot leave the organization"
        );
        // The one who stayed still owns it.
        let stayed = if a.status == 409 { &first } else { &second };
        let members = s
            .get(&format!("/v1/organizations/{org}/members"), Some(stayed))
            .await;
        let owners = members
            .body
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "owner").count());
        assert_eq!(owners, Some(1), "round {round}: {:?}", members.body);
    }
}

// --- one bank transfer, credited once (issue 32) -----------------------------

/// The bank statement of a case: (reference, amount, day). The first and the
/// last share reference and amount but not the day: two transfers.
const TRANSFERS: [(&str, i64, &str); 3] = [
    ("EFT-A", 700, "2026-11-20"),
    ("EFT-B", 300, "2026-11-20"),
    ("eft-a", 700, "2026-11-21"),
];

#[derive(Debug, Clone)]
enum Transfer {
    /// Staff record transfer `t` (with an Idempotency-Key of its own).
    Direct {
        t: usize,
        on_invoice: bool,
        credit: bool,
    },
    /// A finance member claims transfer `t`.
    Claim { t: usize, on_invoice: bool },
    /// Staff approve the `i`-th claim made so far, dated as its transfer.
    Approve { i: usize, credit: bool },
}

fn transfer_ops() -> impl Strategy<Value = Vec<Vec<Transfer>>> {
    let t = 0..TRANSFERS.len();
    let op = prop_oneof![
        2 => (t.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(t, on_invoice, credit)| Transfer::Direct { t, on_invoice, credit }),
        2 => (t, any::<bool>()).prop_map(|(t, on_invoice)| Transfer::Claim { t, on_invoice }),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(i, credit)| Transfer::Approve { i, credit }),
    ];
    // Batches one after the other; the requests of a batch all at once.
    prop::collection::vec(prop::collection::vec(op, 1..6), 1..6)
}

/// A request of a batch: path, token, body, Idempotency-Key, and the
/// transfer it claims (claims only).
type TransferReq = (String, String, Value, Option<String>, Option<usize>);

async fn transfer_case(
    s: &TestStack,
    staff: &str,
    batches: Vec<Vec<Transfer>>,
) -> Result<(), TestCaseError> {
    let email = format!("prop-{}@example.com", Uuid::new_v4().simple());
    let (owner, org) = s.org_with_owner(&email).await;
    let finance = s.member(&owner, &org, "finance").await;
    let c = s
        .post(
            &format!("/v1/admin/organizations/{org}/charges"),
            Some(staff),
            json!({"description": "month", "brand": "Servers", "amount_minor": 1_000}),
        )
        .await;
    let inv = s
        .post(
            &format!("/v1/admin/organizations/{org}/invoices"),
            Some(staff),
            json!({"charge_ids": [c.body["id"]]}),
        )
        .await;
    prop_assert_eq!(inv.status, 201, "{:?}", inv.body);
    let inv = inv.body["id"].clone();
    // Claims made so far: (id, transfer).
    let mut claims: Vec<(String, usize)> = Vec::new();
    let mut used = [false; TRANSFERS.len()];
    for batch in batches {
        let mut reqs: Vec<TransferReq> = Vec::new();
        for op in &batch {
            match *op {
                Transfer::Direct {
                    t,
                    on_invoice,
                    credit,
                } => {
                    let (reference, amount, day) = TRANSFERS[t];
                    used[t] = true;
                    // `credit_remainder` only when asked for: a server that
                    // does not know the field then takes the request as it
                    // did, and the property checks what it does with it.
                    let mut body = json!({"amount_minor": amount, "currency": "TRY",
                                          "method": "bank_transfer", "reference": reference,
                                          "received_at": day,
                                          "invoice_id": on_invoice.then(|| inv.clone())});
                    if credit {
                        body["credit_remainder"] = json!(true);
                    }
                    reqs.push((
                        format!("/v1/admin/organizations/{org}/payments"),
                        staff.to_owned(),
                        body,
                        Some(Uuid::new_v4().to_string()),
                        None,
                    ));
                }
                Transfer::Claim { t, on_invoice } => {
                    let (reference, amount, _) = TRANSFERS[t];
                    used[t] = true;
                    reqs.push((
                        format!("/v1/organizations/{org}/payment-claims"),
                        finance.clone(),
                        json!({"amount_minor": amount, "currency": "TRY", "reference": reference,
                               "invoice_id": on_invoice.then(|| inv.clone())}),
                        None,
                        Some(t),
                    ));
                }
                Transfer::Approve { i, credit } if !claims.is_empty() => {
                    let (id, t) = &claims[i % claims.len()];
                    let mut body = json!({"received_at": TRANSFERS[*t].2});
                    if credit {
                        body["credit_remainder"] = json!(true);
                    }
                    reqs.push((
                        format!("/v1/admin/payment-claims/{id}/approve"),
                        staff.to_owned(),
                        body,
                        None,
                        None,
                    ));
                }
                Transfer::Approve { .. } => {}
            }
        }
        let answers: Vec<Resp> = join_all(reqs.iter().map(|(path, token, body, key, _)| {
            let url = format!("{}{path}", s.core());
            async move {
                let headers: Vec<(&str, &str)> = key
                    .iter()
                    .map(|k| ("idempotency-key", k.as_str()))
                    .collect();
                s.call("POST", &url, Some(token), Some(body.clone()), &headers)
                    .await
            }
        }))
        .await;
        for ((path, _, _, _, claim_of), r) in reqs.into_iter().zip(answers) {
            // Refusals (a duplicate, a paid invoice, a remainder not asked
            // for, a second decision) are fine; anything else is not.
            prop_assert!(
                matches!(r.status, 200 | 201 | 409),
                "{path} answered {}: {:?}",
                r.status,
                r.body
            );
            if let (Some(t), 201) = (claim_of, r.status) {
                claims.push((r.text("id").to_owned(), t));
            }
        }
    }
    // Money received never passes the transfers on the statement: each
    // transfer is at most one payment, and the wallet and the invoice hold
    // no more than the payments brought.
    let org_id: Uuid = org.parse().expect("an org id");
    let rows = sqlx::query!(
        r#"SELECT lower(reference) AS "reference!", amount_minor,
                  to_char(received_at, 'YYYY-MM-DD') AS "day!"
             FROM org_billing.payments WHERE org_id = $1"#,
        org_id
    )
    .fetch_all(&s.db)
    .await
    .expect("the payments");
    let mut received = 0;
    for (t, &(reference, amount, day)) in TRANSFERS.iter().enumerate() {
        let n = rows
            .iter()
            .filter(|p| {
                p.reference == reference.to_lowercase() && p.amount_minor == amount && p.day == day
            })
            .count();
        prop_assert!(n <= usize::from(used[t]), "transfer {t} recorded {n} times");
        received += amount * n as i64;
    }
    let total: i64 = rows.iter().map(|p| p.amount_minor).sum();
    prop_assert_eq!(total, received, "payments of no transfer");
    let statement: i64 = TRANSFERS.iter().map(|t| t.1).sum();
    prop_assert!(total <= statement);
    let wallet = s
        .get(&format!("/v1/organizations/{org}/wallet"), Some(staff))
        .await
        .body["balance_minor"]
        .as_i64()
        .unwrap_or(-1);
    let paid = s
        .get(
            &format!(
                "/v1/organizations/{org}/invoices/{}",
                inv.as_str().expect("an invoice id")
            ),
            Some(staff),
        )
        .await
        .body["paid_minor"]
        .as_i64()
        .unwrap_or(-1);
    prop_assert_eq!(wallet + paid, total);
    Ok(())
}

#[test]
fn random_claims_and_payments_never_receive_more_than_the_transfers() {
    check(12, transfer_ops(), |s, staff, batches| {
        transfer_case(s, staff, batches).boxed_local()
    });
}
