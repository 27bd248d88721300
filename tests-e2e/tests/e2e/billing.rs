//! Billing records end to end: charges, proformas and invoices with their
//! numbers, payments (partial, exact, over, unallocated, from the wallet),
//! claims, billing runs, roles, the HTML preview, and the reconciliation of
//! every money movement between invoices and the wallet's ledger.

use futures::future::join_all;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use tests_e2e::Json;
use tests_e2e::{Resp, TestStack};
use uuid::Uuid;

const STAFF: &str = "staff@example.com";

fn year() -> i32 {
    time::OffsetDateTime::now_utc().year()
}

async fn charge(s: &TestStack, staff: &str, org: &str, amount: i64, what: &str) -> Value {
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/charges"),
            Some(staff),
            json!({"description": what, "brand": "Servers", "amount_minor": amount}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    r.body
}

async fn issue(
    s: &TestStack,
    staff: &str,
    org: &str,
    kind: &str,
    ids: Option<Vec<&Value>>,
) -> Resp {
    let body = match ids {
        Some(ids) => json!({"charge_ids": ids.iter().map(|c| c["id"].clone()).collect::<Vec<_>>()}),
        None => json!({}),
    };
    s.post(
        &format!("/v1/admin/organizations/{org}/{kind}s"),
        Some(staff),
        body,
    )
    .await
}

async fn pay(s: &TestStack, staff: &str, org: &str, body: Value) -> Resp {
    s.post(
        &format!("/v1/admin/organizations/{org}/payments"),
        Some(staff),
        body,
    )
    .await
}

fn payment(amount: i64, currency: &str, invoice: Option<&Value>) -> Value {
    json!({"amount_minor": amount, "currency": currency, "method": "bank_transfer",
           "reference": "EFT 1", "received_at": "2026-11-20", "note": "",
           "invoice_id": invoice.map(|i| i["id"].clone())})
}

async fn charge_status(s: &TestStack, org: &str, id: &Value, staff: &str) -> String {
    let r = s
        .get(&format!("/v1/organizations/{org}/charges"), Some(staff))
        .await;
    r.body
        .as_array()
        .expect("a list")
        .iter()
        .find(|c| c["id"] == *id)
        .map(|c| c.text("status").to_owned())
        .unwrap_or_else(|| panic!("no charge {id} in {}", r.body))
}

#[tokio::test]
async fn charges_proformas_and_invoices_move_through_their_states() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("states@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let y = year();

    let a = charge(&s, &staff, &org, 10_000, "Server a").await;
    assert_eq!(
        (a["status"].as_str(), a["currency"].as_str()),
        (Some("pending"), Some("TRY"))
    );
    let b = charge(&s, &staff, &org, 2_500, "Server b").await;
    let w = charge(&s, &staff, &org, 99, "to waive").await;
    let r = s
        .post(
            &format!(
                "/v1/admin/charges/{}/waive",
                w["id"].as_str().expect("present")
            ),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!((r.status, r.body["status"].as_str()), (200, Some("waived")));
    let r = s
        .post(
            &format!(
                "/v1/admin/charges/{}/waive",
                w["id"].as_str().expect("present")
            ),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);

    // A proforma from the pending charges: numbered, issued, its charges quoted.
    let pf = issue(&s, &staff, &org, "proforma", None).await;
    assert_eq!(pf.status, 201, "{:?}", pf.body);
    assert_eq!(pf.body["kind"], "proforma");
    assert_eq!(pf.body["status"], "issued");
    assert_eq!(pf.body["number"], format!("PF-{y}-000001"));
    assert_eq!(pf.body["total_minor"], 12_500);
    assert_eq!(pf.body["subtotal_minor"], 12_500);
    assert_eq!(pf.body["tax_minor"], 0);
    assert_eq!(charge_status(&s, &org, &a["id"], &owner).await, "quoted");
    // Nothing pending is left.
    assert_eq!(issue(&s, &staff, &org, "invoice", None).await.status, 409);
    // Void: the charges return to pending; a second void is 409.
    let pf_id = pf.body["id"].as_str().expect("present").to_owned();
    let r = s
        .post(
            &format!("/v1/admin/invoices/{pf_id}/void"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!((r.status, r.body["status"].as_str()), (200, Some("void")));
    assert_eq!(charge_status(&s, &org, &a["id"], &owner).await, "pending");
    assert_eq!(
        s.post(
            &format!("/v1/admin/invoices/{pf_id}/void"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );
    assert_eq!(
        s.post(
            &format!("/v1/admin/invoices/{pf_id}/convert"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );

    // A second proforma, converted: a new invoice with the same lines.
    let pf2 = issue(&s, &staff, &org, "proforma", Some(vec![&a, &b])).await;
    assert_eq!(pf2.body["number"], format!("PF-{y}-000002"));
    let pf2_id = pf2.body["id"].as_str().expect("present").to_owned();
    let inv = s
        .post(
            &format!("/v1/admin/invoices/{pf2_id}/convert"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(inv.status, 200, "{:?}", inv.body);
    assert_eq!(inv.body["kind"], "invoice");
    assert_eq!(inv.body["number"], format!("INV-{y}-000001"));
    assert_eq!(inv.body["converted_from"], pf2_id.as_str());
    assert_eq!(inv.body["total_minor"], 12_500);
    let inv_id = inv.body["id"].as_str().expect("present").to_owned();
    let old = s
        .get(
            &format!("/v1/organizations/{org}/invoices/{pf2_id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(old.body["status"], "void");
    assert_eq!(old.body["converted_to"], inv_id.as_str());
    assert_eq!(
        s.post(
            &format!("/v1/admin/invoices/{pf2_id}/convert"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );
    assert_eq!(
        s.post(
            &format!("/v1/admin/invoices/{inv_id}/convert"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );
    assert_eq!(charge_status(&s, &org, &a["id"], &owner).await, "invoiced");
    // Invoiced is final: not waivable, not on another document.
    assert_eq!(
        s.post(
            &format!(
                "/v1/admin/charges/{}/waive",
                a["id"].as_str().expect("present")
            ),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );
    assert_eq!(
        issue(&s, &staff, &org, "invoice", Some(vec![&a]))
            .await
            .status,
        409
    );

    // The detail carries the lines.
    let d = s
        .get(
            &format!("/v1/organizations/{org}/invoices/{inv_id}"),
            Some(&owner),
        )
        .await;
    assert_eq!(d.status, 200);
    let lines = d.body["lines"].as_array().expect("lines");
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["description"], "Server a");
    assert_eq!(lines[0]["amount_minor"], 10_000);
    assert_eq!(lines[1]["brand"], "Servers");

    // The legal document: https only.
    let path = format!("/v1/admin/invoices/{inv_id}");
    assert_eq!(
        s.patch(
            &path,
            Some(&staff),
            json!({"legal_document_url": "http://x.example/a.pdf"})
        )
        .await
        .status,
        400
    );
    let r = s
        .patch(
            &path,
            Some(&staff),
            json!({"legal_document_url": "https://e-fatura.example/a.pdf"}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["legal_document_url"].as_str()),
        (200, Some("https://e-fatura.example/a.pdf"))
    );
    assert_eq!(
        s.patch(
            &format!("/v1/admin/invoices/{pf2_id}"),
            Some(&staff),
            json!({"legal_document_url": null})
        )
        .await
        .status,
        409
    );

    // Lists and their filters.
    let all = s
        .get(&format!("/v1/organizations/{org}/invoices"), Some(&owner))
        .await;
    assert_eq!(all.body.as_array().expect("present").len(), 3);
    let pfs = s
        .get(
            &format!("/v1/organizations/{org}/invoices?kind=proforma"),
            Some(&owner),
        )
        .await;
    assert_eq!(pfs.body.as_array().expect("present").len(), 2);
    let voids = s
        .get(
            &format!("/v1/organizations/{org}/invoices?status=void&limit=1"),
            Some(&owner),
        )
        .await;
    assert_eq!(voids.body.as_array().expect("present").len(), 1);
    let next = voids
        .headers
        .get("x-next-cursor")
        .expect("a next page")
        .to_str()
        .expect("present")
        .to_owned();
    let rest = s
        .get(
            &format!("/v1/organizations/{org}/invoices?status=void&limit=1&cursor={next}"),
            Some(&owner),
        )
        .await;
    assert_eq!(rest.body.as_array().expect("present").len(), 1);
    assert_ne!(rest.body[0]["id"], voids.body[0]["id"]);
    assert_eq!(
        s.get(
            &format!("/v1/organizations/{org}/invoices?status=late"),
            Some(&owner)
        )
        .await
        .status,
        400
    );
    let pending = s
        .get(
            &format!("/v1/organizations/{org}/charges?status=invoiced"),
            Some(&owner),
        )
        .await;
    assert_eq!(pending.body.as_array().expect("present").len(), 2);

    // Input and access.
    for bad in [
        json!({"description": "x", "brand": "b", "amount_minor": 0}),
        json!({"description": "", "brand": "b", "amount_minor": 5}),
        json!({"description": "x", "brand": "b", "amount_minor": 1.5}),
        json!({"description": "x", "brand": "b", "amount_minor": 5, "extra": 1}),
    ] {
        let r = s
            .post(
                &format!("/v1/admin/organizations/{org}/charges"),
                Some(&staff),
                bad.clone(),
            )
            .await;
        assert_eq!(r.status, 400, "{bad} {:?}", r.body);
    }
    let missing = Uuid::new_v4();
    assert_eq!(charge_post(&s, &staff, &missing.to_string()).await, 404);
    assert_eq!(charge_post(&s, &owner, &org).await, 403);
    assert_eq!(
        s.post(
            &format!("/v1/admin/invoices/{missing}/void"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        404
    );
    assert_eq!(
        issue(
            &s,
            &staff,
            &org,
            "invoice",
            Some(vec![&json!({"id": missing})])
        )
        .await
        .status,
        422
    );
}

async fn charge_post(s: &TestStack, token: &str, org: &str) -> u16 {
    s.post(
        &format!("/v1/admin/organizations/{org}/charges"),
        Some(token),
        json!({"description": "x", "brand": "b", "amount_minor": 5}),
    )
    .await
    .status
}

async fn wallet(s: &TestStack, token: &str, org: &str) -> i64 {
    s.get(&format!("/v1/organizations/{org}/wallet"), Some(token))
        .await
        .body["balance_minor"]
        .as_i64()
        .expect("a balance")
}

#[tokio::test]
async fn payments_apply_partially_exactly_and_over_and_the_rest_reaches_the_wallet() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("payments@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let c = charge(&s, &staff, &org, 10_000, "month").await;
    let inv = issue(&s, &staff, &org, "invoice", Some(vec![&c]))
        .await
        .body;
    let inv_id = inv["id"].as_str().expect("present").to_owned();

    let r = pay(&s, &staff, &org, payment(3_000, "TRY", Some(&inv))).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(
        (
            r.body["applied_minor"].as_i64(),
            r.body["invoice_number"].as_str()
        ),
        (Some(3_000), inv["number"].as_str())
    );
    let d = s
        .get(
            &format!("/v1/organizations/{org}/invoices/{inv_id}"),
            Some(&owner),
        )
        .await
        .body;
    assert_eq!(
        (d["status"].as_str(), d["paid_minor"].as_i64()),
        (Some("partially_paid"), Some(3_000))
    );
    assert!(d["paid_at"].is_null());
    // A currency mismatch is refused and changes nothing.
    let r = pay(&s, &staff, &org, payment(7_000, "EUR", Some(&inv))).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    // A currency the API does not know is a 400 naming the codes, not a 500
    // and not a default.
    for unknown in ["GBP", "try", ""] {
        let r = pay(&s, &staff, &org, payment(7_000, unknown, Some(&inv))).await;
        assert_eq!(r.status, 400, "{unknown}: {:?}", r.body);
        assert!(
            r.error().contains("currency must be one of TRY, EUR, USD"),
            "{unknown}: {:?}",
            r.body
        );
    }
    // Paid exactly: paid, with paid_at; a paid invoice cannot be voided.
    let r = pay(&s, &staff, &org, payment(7_000, "TRY", Some(&inv))).await;
    assert_eq!(r.body["applied_minor"], 7_000);
    let d = s
        .get(
            &format!("/v1/organizations/{org}/invoices/{inv_id}"),
            Some(&owner),
        )
        .await
        .body;
    assert_eq!(
        (d["status"].as_str(), d["paid_minor"].as_i64()),
        (Some("paid"), Some(10_000))
    );
    assert!(d["paid_at"].is_string());
    assert_eq!(
        s.post(
            &format!("/v1/admin/invoices/{inv_id}/void"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );
    assert_eq!(wallet(&s, &owner, &org).await, 0);

    let c2 = charge(&s, &staff, &org, 5_000, "second").await;
    let inv2 = issue(&s, &staff, &org, "invoice", Some(vec![&c2]))
        .await
        .body;
    // Overpaid: more than the invoice owes is 409 unless staff choose to
    // credit the remainder to the wallet.
    let r = pay(&s, &staff, &org, payment(8_000, "TRY", Some(&inv2))).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("credit_remainder"), "{:?}", r.body);
    assert_eq!(wallet(&s, &owner, &org).await, 0);
    let mut over = payment(8_000, "TRY", Some(&inv2));
    over["credit_remainder"] = json!(true);
    let r = pay(&s, &staff, &org, over).await;
    assert_eq!(
        (
            r.body["applied_minor"].as_i64(),
            r.body["amount_minor"].as_i64()
        ),
        (Some(5_000), Some(8_000))
    );
    assert!(r.body["wallet_transaction_id"].is_i64());
    assert_eq!(wallet(&s, &owner, &org).await, 3_000);
    // Unallocated: all to the wallet; in another currency than the wallet: 422.
    let r = pay(&s, &staff, &org, payment(1_000, "TRY", None)).await;
    assert_eq!((r.status, r.body["applied_minor"].as_i64()), (201, Some(0)));
    assert_eq!(wallet(&s, &owner, &org).await, 4_000);
    assert_eq!(
        pay(&s, &staff, &org, payment(1_000, "USD", None))
            .await
            .status,
        422
    );

    // From the wallet: partly, then below zero (409), then more than owed (422).
    let c3 = charge(&s, &staff, &org, 6_000, "third").await;
    let inv3 = issue(&s, &staff, &org, "invoice", Some(vec![&c3]))
        .await
        .body;
    let inv3_id = inv3["id"].as_str().expect("present").to_owned();
    let from_wallet = |amount: i64| {
        let (s, staff, id) = (&s, staff.clone(), inv3_id.clone());
        async move {
            s.post(
                &format!("/v1/admin/invoices/{id}/pay-from-wallet"),
                Some(&staff),
                json!({"amount_minor": amount}),
            )
            .await
        }
    };
    let r = from_wallet(4_000).await;
    assert_eq!(
        (
            r.status,
            r.body["status"].as_str(),
            r.body["paid_minor"].as_i64()
        ),
        (200, Some("partially_paid"), Some(4_000))
    );
    assert_eq!(wallet(&s, &owner, &org).await, 0);
    let r = from_wallet(1).await;
    assert_eq!(
        (r.status, r.error()),
        (409, "the balance would go below zero")
    );
    s.credit(&staff, &org, 10_000).await;
    assert_eq!(from_wallet(2_001).await.status, 422);
    assert_eq!(from_wallet(2_000).await.body["status"], "paid");
    assert_eq!(wallet(&s, &owner, &org).await, 8_000);

    // A proforma takes no payment; the payments list names the invoices.
    let c4 = charge(&s, &staff, &org, 100, "fourth").await;
    let pf = issue(&s, &staff, &org, "proforma", Some(vec![&c4]))
        .await
        .body;
    assert_eq!(
        pay(&s, &staff, &org, payment(100, "TRY", Some(&pf)))
            .await
            .status,
        422
    );
    let list = s
        .get(&format!("/v1/organizations/{org}/payments"), Some(&owner))
        .await
        .body;
    assert_eq!(list.as_array().expect("present").len(), 4);
    assert!(list
        .as_array()
        .expect("present")
        .iter()
        .any(|p| p["invoice_number"] == inv2["number"]));

    // An Idempotency-Key replays the first payment instead of a second one.
    let key_pay = || {
        let s = &s;
        let staff = staff.clone();
        let org = org.clone();
        async move {
            s.call(
                "POST",
                &format!("{}/v1/admin/organizations/{org}/payments", s.core()),
                Some(&staff),
                Some(payment(500, "TRY", None)),
                &[("idempotency-key", "transfer-77")],
            )
            .await
        }
    };
    let first = key_pay().await;
    let again = key_pay().await;
    assert_eq!((first.status, again.status), (201, 201));
    assert_eq!(first.body["id"], again.body["id"]);
    assert_eq!(wallet(&s, &owner, &org).await, 8_500);
    assert_eq!(reconciliation_faults(&s, &org).await, Vec::<String>::new());
}

/// What does not reconcile between the organization's invoices, payments,
/// settlements and wallet ledger (empty when everything does).
async fn reconciliation_faults(s: &TestStack, org: &str) -> Vec<String> {
    let org = Uuid::parse_str(org).expect("a uuid");
    let r = sqlx::query!(
        r#"SELECT
         (SELECT count(*) FROM org_billing.invoices i WHERE i.org_id = $1 AND i.paid_minor <>
             COALESCE((SELECT sum(applied_minor) FROM org_billing.payments p WHERE p.invoice_id = i.id), 0)
           + COALESCE((SELECT sum(amount_minor) FROM org_billing.wallet_settlements w
                        WHERE w.invoice_id = i.id), 0)) AS "paid!",
         (SELECT count(*) FROM org_billing.payments p LEFT JOIN org_billing.wallet_transactions t
              ON t.id = p.wallet_transaction_id
           WHERE p.org_id = $1 AND ((p.amount_minor - p.applied_minor) <> COALESCE(t.delta_minor, 0)
              OR (t.id IS NOT NULL AND (t.kind <> 'payment' OR t.org_id <> p.org_id)))) AS "credits!",
         (SELECT count(*) FROM org_billing.wallet_settlements w JOIN org_billing.wallet_transactions t
              ON t.id = w.wallet_transaction_id
           WHERE w.org_id = $1 AND (t.delta_minor <> -w.amount_minor OR t.kind <> 'invoice_payment'))
           AS "debits!",
         (SELECT count(*) FROM org_billing.wallet_transactions t WHERE t.org_id = $1
              AND t.kind IN ('payment', 'invoice_payment')
              AND NOT EXISTS (SELECT 1 FROM org_billing.payments p WHERE p.wallet_transaction_id = t.id)
              AND NOT EXISTS (SELECT 1 FROM org_billing.wallet_settlements w
                               WHERE w.wallet_transaction_id = t.id)) AS "unexplained!",
         (SELECT count(*) FROM org_billing.wallets w WHERE w.org_id = $1 AND w.balance_minor <>
             COALESCE((SELECT sum(delta_minor) FROM org_billing.wallet_transactions t
                        WHERE t.org_id = w.org_id), 0)) AS "balance!",
         (SELECT count(*) FROM org_billing.wallets w WHERE w.org_id = $1 AND
             w.balance_minor + COALESCE((SELECT sum(paid_minor) FROM org_billing.invoices i
                                          WHERE i.org_id = $1), 0)
             <> COALESCE((SELECT sum(amount_minor) FROM org_billing.payments p WHERE p.org_id = $1), 0)
              + COALESCE((SELECT sum(delta_minor) FROM org_billing.wallet_transactions t
                           WHERE t.org_id = $1 AND t.kind IN ('bank_transfer', 'correction')), 0))
           AS "money_in!""#,
        org,
    )
    .fetch_one(&s.db)
    .await
    .expect("the reconciliation query");
    let checks = [
        (
            "an invoice's paid_minor is not what its payments and settlements applied",
            r.paid,
        ),
        (
            "a payment's unapplied part is not its wallet credit",
            r.credits,
        ),
        ("a settlement is not its wallet debit", r.debits),
        (
            "a wallet row of a payment or settlement that no record explains",
            r.unexplained,
        ),
        (
            "the wallet's balance is not the sum of its ledger",
            r.balance,
        ),
        ("money in is not wallet plus invoices paid", r.money_in),
    ];
    let mut faults = Vec::new();
    for (what, n) in checks {
        if n != 0 {
            faults.push(format!("{what}: {n}"));
        }
    }
    faults
}

#[tokio::test]
async fn numbers_stay_gapless_under_50_concurrent_issues_and_after_a_rollback() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in(STAFF).await;
    // Five organizations of one entity (Turkey's), ten charges each.
    let mut work = Vec::new();
    for i in 0..5 {
        let (_, org) = s.org_with_owner(&format!("numbers{i}@example.com")).await;
        for k in 0..10 {
            work.push((org.clone(), charge(&s, &staff, &org, 100 + k, "line").await));
        }
    }
    let answers = join_all(
        work.iter()
            .map(|(org, c)| issue(&s, &staff, org, "invoice", Some(vec![c]))),
    )
    .await;
    let y = year();
    let numbers: BTreeSet<String> = answers
        .iter()
        .map(|r| {
            assert_eq!(r.status, 201, "{:?}", r.body);
            r.body["number"].as_str().expect("present").to_owned()
        })
        .collect();
    let expected: BTreeSet<String> = (1..=50).map(|n| format!("INV-{y}-{n:06}")).collect();
    assert_eq!(numbers, expected);

    // A failure after the number was taken rolls it back: the next issue gets it.
    let (_, org) = s.org_with_owner("rollback@example.com").await;
    let doomed = charge(&s, &staff, &org, 100, "explode").await;
    s.db_exec(
        "CREATE FUNCTION org_billing.explode() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.description = 'explode' THEN RAISE EXCEPTION 'forced'; END IF; RETURN NEW; END $$",
    )
    .await;
    s.db_exec(
        "CREATE TRIGGER explode BEFORE INSERT ON org_billing.invoice_lines
             FOR EACH ROW EXECUTE FUNCTION org_billing.explode()",
    )
    .await;
    let r = issue(&s, &staff, &org, "invoice", Some(vec![&doomed])).await;
    assert_eq!(r.status, 500, "{:?}", r.body);
    s.db_exec("DROP TRIGGER explode ON org_billing.invoice_lines")
        .await;
    assert_eq!(
        charge_status(&s, &org, &doomed["id"], &staff).await,
        "pending"
    );
    let r = issue(&s, &staff, &org, "invoice", Some(vec![&doomed])).await;
    assert_eq!(r.body["number"], format!("INV-{y}-000051"));
    // Proformas count on their own.
    let c = charge(&s, &staff, &org, 100, "pf").await;
    assert_eq!(
        issue(&s, &staff, &org, "proforma", Some(vec![&c]))
            .await
            .body["number"],
        format!("PF-{y}-000001")
    );
}

#[tokio::test]
async fn claims_are_approved_once_or_rejected_with_notes_the_customer_sees() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("claims@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let manager = s.member(&owner, &org, "manager").await;
    let staff = s.sign_in(STAFF).await;
    let c = charge(&s, &staff, &org, 9_000, "month").await;
    let inv = issue(&s, &staff, &org, "invoice", Some(vec![&c]))
        .await
        .body;
    let claims = format!("/v1/organizations/{org}/payment-claims");
    let claim = |token: &str, body: Value| {
        let (s, claims, token) = (&s, claims.clone(), token.to_owned());
        async move { s.post(&claims, Some(&token), body).await }
    };
    let body = json!({"amount_minor": 9_000, "currency": "TRY", "reference": "EFT 2026-11-20 #881",
                      "note": "paid from Garanti", "invoice_id": inv["id"]});
    assert_eq!(claim(&manager, body.clone()).await.status, 403);
    let mismatch = json!({"amount_minor": 9_000, "currency": "EUR", "reference": "x", "invoice_id": inv["id"]});
    assert_eq!(claim(&finance, mismatch).await.status, 422);
    assert_eq!(
        claim(
            &finance,
            json!({"amount_minor": 9_000, "currency": "TRY", "reference": ""})
        )
        .await
        .status,
        400
    );
    let unknown = claim(
        &finance,
        json!({"amount_minor": 9_000, "currency": "GBP", "reference": "EFT 1"}),
    )
    .await;
    assert_eq!(unknown.status, 400, "{:?}", unknown.body);
    assert!(
        unknown
            .error()
            .contains("currency must be one of TRY, EUR, USD (not \"GBP\")"),
        "{:?}",
        unknown.body
    );
    let first = claim(&finance, body.clone()).await;
    assert_eq!(
        (first.status, first.body["status"].as_str()),
        (201, Some("pending"))
    );
    let second = claim(
        &finance,
        json!({"amount_minor": 500, "currency": "TRY", "reference": "EFT 9"}),
    )
    .await;
    assert_eq!(second.status, 201);

    // The staff queue, oldest first, with the organization's name.
    let q = s.get("/v1/admin/payment-claims", Some(&staff)).await;
    let mine: Vec<&Value> = q
        .body
        .as_array()
        .expect("present")
        .iter()
        .filter(|c| c["org_id"] == org.as_str())
        .collect();
    assert_eq!(mine.len(), 2);
    assert_eq!(mine[0]["id"], first.body["id"]);
    assert_eq!(mine[0]["org_name"], "Acme");
    assert_eq!(
        s.get("/v1/admin/payment-claims", Some(&finance))
            .await
            .status,
        403
    );

    // Two concurrent approvals: one payment, one 409.
    let id = first.body["id"].as_str().expect("present");
    let approve_path = format!("/v1/admin/payment-claims/{id}/approve");
    let approve = || s.post(&approve_path, Some(&staff), json!({}));
    let (a, b) = tokio::join!(approve(), approve());
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{:?} {:?}", a.body, b.body);
    let approved = if a.status == 200 { a.body } else { b.body };
    assert_eq!(approved["status"], "approved");
    let paid: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM org_billing.payments WHERE claim_id = $1"#,
        Uuid::parse_str(id).expect("present"),
    )
    .fetch_one(&s.db)
    .await
    .expect("present");
    assert_eq!(paid, 1);
    let d = s
        .get(
            &format!(
                "/v1/organizations/{org}/invoices/{}",
                inv["id"].as_str().expect("present")
            ),
            Some(&finance),
        )
        .await;
    assert_eq!(d.body["status"], "paid");
    assert_eq!(
        s.post(
            &format!("/v1/admin/payment-claims/{id}/reject"),
            Some(&staff),
            json!({"review_notes": "late"})
        )
        .await
        .status,
        409
    );

    // Rejected with notes the customer reads.
    let id2 = second.body["id"].as_str().expect("present");
    assert_eq!(
        s.post(
            &format!("/v1/admin/payment-claims/{id2}/reject"),
            Some(&staff),
            json!({"review_notes": ""})
        )
        .await
        .status,
        400
    );
    let r = s
        .post(
            &format!("/v1/admin/payment-claims/{id2}/reject"),
            Some(&staff),
            json!({"review_notes": "no such transfer on our statement"}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (200, Some("rejected"))
    );
    let mine = s.get(&claims, Some(&finance)).await.body;
    let rejected = mine
        .as_array()
        .expect("present")
        .iter()
        .find(|c| c["id"] == id2)
        .expect("listed");
    assert_eq!(
        rejected["review_notes"],
        "no such transfer on our statement"
    );
    assert!(rejected["reviewed_at"].is_string());
    assert_eq!(
        s.post(
            &format!("/v1/admin/payment-claims/{id2}/approve"),
            Some(&staff),
            json!({})
        )
        .await
        .status,
        409
    );
    assert_eq!(wallet(&s, &owner, &org).await, 0);
    assert_eq!(reconciliation_faults(&s, &org).await, Vec::<String>::new());
}

#[tokio::test]
async fn finance_reads_other_members_get_403_naming_finance_and_outsiders_404() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("roles-billing@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let c = charge(&s, &staff, &org, 100, "x").await;
    let inv = issue(&s, &staff, &org, "invoice", Some(vec![&c]))
        .await
        .body;
    let inv_id = inv["id"].as_str().expect("present");
    let (other_owner, other_org) = s.org_with_owner("roles-other@example.com").await;
    let outsider = s.sign_in("roles-outsider@example.com").await;
    let paths = [
        format!("/v1/organizations/{org}/charges"),
        format!("/v1/organizations/{org}/invoices"),
        format!("/v1/organizations/{org}/invoices/{inv_id}"),
        format!("/v1/organizations/{org}/invoices/{inv_id}/html"),
        format!("/v1/organizations/{org}/payments"),
        format!("/v1/organizations/{org}/payment-claims"),
    ];
    let finance = s.member(&owner, &org, "finance").await;
    for p in &paths {
        assert_eq!(s.get(p, Some(&owner)).await.status, 200, "{p}");
        assert_eq!(s.get(p, Some(&finance)).await.status, 200, "{p}");
        assert_eq!(s.get(p, Some(&outsider)).await.status, 404, "{p}");
    }
    for role in ["manager", "developer", "visitor"] {
        let m = s.member(&owner, &org, role).await;
        for p in &paths {
            let r = s.get(p, Some(&m)).await;
            assert_eq!(r.status, 403, "{role} {p}");
            assert!(r.error().contains("finance"), "{role} {p}: {}", r.error());
        }
    }
    // Another organization's invoice through this one's path: 404.
    let r = s
        .get(
            &format!("/v1/organizations/{other_org}/invoices/{inv_id}"),
            Some(&other_owner),
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn the_html_preview_opened_in_chromium_shows_the_number_and_total() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("html@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let c = charge(&s, &staff, &org, 123_450, "<b>bold</b> & more").await;
    let inv = issue(&s, &staff, &org, "invoice", Some(vec![&c]))
        .await
        .body;
    let r = s
        .http
        .get(format!(
            "{}/v1/organizations/{org}/invoices/{}/html",
            s.core(),
            inv["id"].as_str().expect("present")
        ))
        .bearer_auth(&owner)
        .send()
        .await
        .expect("the preview");
    assert_eq!(r.status(), 200);
    let kind = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .expect("a content-type")
        .to_owned();
    assert!(kind.starts_with("text/html"), "{kind}");
    let r = (200, kind, r.text().await.expect("a body"));
    let dir = std::env::temp_dir().join(format!("hub-invoice-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("invoice.html");
    std::fs::write(&file, &r.2).expect("written");
    let home = dir.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
            .arg(format!("file://{}", file.display()))
            .env("HOME", &home)
            .output()
    })
    .await
    .expect("joined")
    .expect("chromium runs (Debian package chromium, installed by scripts/deps.sh)");
    let dom = String::from_utf8_lossy(&out.stdout);
    let number = inv["number"].as_str().expect("present");
    assert!(
        dom.contains(&format!("<span id=\"number\">{number}</span>")),
        "{dom}"
    );
    assert!(
        dom.contains("<strong id=\"total\">1234.50 TRY</strong>"),
        "{dom}"
    );
    // The description is text, not markup.
    assert!(dom.contains("&lt;b&gt;bold&lt;/b&gt; &amp; more"), "{dom}");
    assert!(!dom.contains("<b>bold</b>"), "{dom}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Organizations (of the Turkish entity) made by SQL, each with `per_org`
/// pending usage charges of `period`: what server-product's usage events
/// leave behind.
async fn usage_orgs(s: &TestStack, n: i64, per_org: i64, period: &str) -> Vec<Uuid> {
    let ids: Vec<Uuid> = (0..n).map(|_| Uuid::new_v4()).collect();
    sqlx::query!(
        "WITH d AS (SELECT distributor_id FROM org_billing.distributor_coverage WHERE country = 'TR'),
              o AS (INSERT INTO org_billing.organizations (id, name, legal_type, country, distributor_id, created_by)
                    SELECT id, 'run ' || id, 'corporate', 'TR', d.distributor_id, gen_random_uuid()
                      FROM unnest($1::uuid[]) AS id, d RETURNING id)
         INSERT INTO org_billing.wallets (org_id, currency) SELECT id, 'TRY' FROM o",
        &ids,
    )
    .execute(&s.db)
    .await
    .expect("organizations");
    sqlx::query!(
        "INSERT INTO org_billing.charges (id, org_id, description, brand, qty, unit_minor, amount_minor,
                                          currency, source, source_ref, period)
         SELECT gen_random_uuid(), o, 'usage ' || k, 'Servers', k::int, 100, 100 * k, 'TRY', 'usage',
                'test:' || o || ':' || k || ':' || $3::text, $3::text
           FROM unnest($1::uuid[]) AS o, generate_series(1, $2::bigint) AS k",
        &ids,
        per_org,
        period,
    )
    .execute(&s.db)
    .await
    .expect("charges");
    ids
}

#[tokio::test]
async fn a_billing_run_invoices_a_period_once_even_on_two_replicas() {
    let s = TestStack::spawn_with(tests_e2e::StackOptions {
        org_billing_toml: "[billing]\nrun_batch = 7\n".into(),
        ..Default::default()
    })
    .await;
    let staff = s.sign_in(STAFF).await;
    let orgs = usage_orgs(&s, 40, 3, "2026-10").await;
    // Another period's charges stay pending.
    let later = usage_orgs(&s, 2, 1, "2026-11").await;
    // A second replica that finishes unfinished runs every second.
    let cancel = tokio_util::sync::CancellationToken::new();
    let replica = org_billing::build(
        s.settings::<org_billing::OrgBilling>(
            "[billing]\nrun_batch = 5\nresume_interval_secs = 1\n",
        ),
        service_kit::Runtime::new(cancel.clone()),
    )
    .await
    .expect("a second replica");
    tokio::spawn(replica.run_until_stopped());
    let start = || {
        s.post(
            "/v1/admin/billing-runs",
            Some(&staff),
            json!({"period": "2026-10"}),
        )
    };
    let (a, b) = tokio::join!(start(), start());
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [200, 201], "{:?} {:?}", a.body, b.body);
    assert_eq!(a.body["id"], b.body["id"]);
    let run_id = a.body["id"].as_str().expect("present").to_owned();
    let run = s
        .get(&format!("/v1/admin/billing-runs/{run_id}"), Some(&staff))
        .await
        .body;
    assert_eq!(run["status"], "done", "{run}");
    assert_eq!(
        (
            run["organizations"].as_i64(),
            run["invoices"].as_i64(),
            run["charges"].as_i64()
        ),
        (Some(40), Some(40), Some(120))
    );
    assert_eq!(run["totals"]["TRY"], 40 * 600);
    // One invoice per organization, numbers 1..=40 without gaps.
    let rows: Vec<(Uuid, String, i64)> = sqlx::query!(
        "SELECT org_id, number, total_minor FROM org_billing.invoices \
         WHERE run_id = $1::text::uuid ORDER BY number",
        run_id,
    )
    .fetch_all(&s.db)
    .await
    .expect("present")
    .into_iter()
    .map(|r| (r.org_id, r.number, r.total_minor))
    .collect();
    let y = year();
    assert_eq!(
        rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
        (1..=40)
            .map(|n| format!("INV-{y}-{n:06}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<BTreeSet<_>>(),
        orgs.iter().copied().collect()
    );
    assert!(rows.iter().all(|r| r.2 == 600));
    // Again: nothing new.
    let again = start().await;
    assert_eq!(
        (again.status, again.body["invoices"].as_i64()),
        (200, Some(40))
    );
    let total = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM org_billing.invoices"#)
        .fetch_one(&s.db)
        .await
        .expect("present");
    assert_eq!(total, 40);
    let pending = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM org_billing.charges WHERE status = 'pending' AND org_id = ANY($1)"#,
        &later,
    )
    .fetch_one(&s.db)
    .await
    .expect("present");
    assert_eq!(pending, 2);
    assert_eq!(
        s.post(
            "/v1/admin/billing-runs",
            Some(&staff),
            json!({"period": "2026-13"})
        )
        .await
        .status,
        400
    );
    cancel.cancel();
}

/// A small deterministic generator (xorshift), so a failing sequence is
/// replayed from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test]
async fn after_any_sequence_of_billing_moves_wallet_and_invoices_reconcile() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in(STAFF).await;
    for seed in [0x9e37_79b9_7f4a_7c15_u64, 42, 7_777_777] {
        let (owner, org) = s
            .org_with_owner(&format!("property{seed}@example.com"))
            .await;
        let finance = s.member(&owner, &org, "finance").await;
        let mut rng = Rng(seed);
        let mut log = Vec::new();
        for _ in 0..40 {
            let invoices: Vec<Value> = s
                .get(
                    &format!("/v1/organizations/{org}/invoices?kind=invoice"),
                    Some(&owner),
                )
                .await
                .array("");
            let pick = |rng: &mut Rng| -> Option<Value> {
                (!invoices.is_empty())
                    .then(|| invoices[rng.below(invoices.len() as u64) as usize].clone())
            };
            let amount = 1 + rng.below(5_000) as i64;
            let (what, r) = match rng.below(8) {
                0 | 1 => {
                    charge(&s, &staff, &org, amount, "usage").await;
                    ("charge", 201)
                }
                2 => {
                    let kind = if rng.below(3) == 0 {
                        "proforma"
                    } else {
                        "invoice"
                    };
                    (kind, issue(&s, &staff, &org, kind, None).await.status)
                }
                3 => (
                    "payment",
                    pay(
                        &s,
                        &staff,
                        &org,
                        payment(amount, "TRY", pick(&mut rng).as_ref()),
                    )
                    .await
                    .status,
                ),
                4 => ("credit", s.credit(&staff, &org, amount).await.status),
                5 => match pick(&mut rng) {
                    Some(i) => (
                        "from wallet",
                        s.post(
                            &format!(
                                "/v1/admin/invoices/{}/pay-from-wallet",
                                i["id"].as_str().expect("present")
                            ),
                            Some(&staff),
                            json!({"amount_minor": amount}),
                        )
                        .await
                        .status,
                    ),
                    None => ("from wallet", 0),
                },
                6 => {
                    let inv = pick(&mut rng);
                    let body = json!({"amount_minor": amount, "currency": "TRY", "reference": "EFT",
                                      "invoice_id": inv.map(|i| i["id"].clone())});
                    let c = s
                        .post(
                            &format!("/v1/organizations/{org}/payment-claims"),
                            Some(&finance),
                            body,
                        )
                        .await;
                    let decision = if rng.below(2) == 0 {
                        "approve"
                    } else {
                        "reject"
                    };
                    let r = s
                        .post(
                            &format!("/v1/admin/payment-claims/{}/{decision}", c.text("id")),
                            Some(&staff),
                            json!({"review_notes": "checked"}),
                        )
                        .await;
                    ("claim", r.status)
                }
                _ => ("correction", s.credit(&staff, &org, -amount).await.status),
            };
            // Refusals are fine (a move below zero, an owed amount passed);
            // a server error is not.
            assert!(r < 500, "seed {seed}: {what} answered {r} after {log:?}");
            log.push((what, r));
        }
        assert_eq!(
            reconciliation_faults(&s, &org).await,
            Vec::<String>::new(),
            "seed {seed}: {log:?}"
        );
    }
}

#[tokio::test]
async fn the_dev_seed_gives_billing_examples_once() {
    let s = TestStack::spawn_with(tests_e2e::StackOptions {
        org_billing_toml: "[seed]\nbilling_examples = true\n".into(),
        ..Default::default()
    })
    .await;
    // A second start (as `migrate` then the service do) adds nothing.
    org_billing::migrate(
        &s.settings::<org_billing::OrgBilling>("[seed]\nbilling_examples = true\n"),
    )
    .await
    .expect("migrate again");
    let staff = s.sign_in(STAFF).await;
    let org = org_billing::seed::DEMO_ORG;
    let docs = s
        .get(&format!("/v1/organizations/{org}/invoices"), Some(&staff))
        .await
        .body;
    let mut kinds: Vec<(String, String)> = docs
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| (d.text("kind").to_owned(), d.text("status").to_owned()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("invoice".into(), "partially_paid".into()),
            ("proforma".into(), "issued".into())
        ]
    );
    let pending = s
        .get(
            &format!("/v1/organizations/{org}/charges?status=pending"),
            Some(&staff),
        )
        .await
        .body;
    assert_eq!(pending.as_array().map(Vec::len), Some(1));
    let queue = s.get("/v1/admin/payment-claims", Some(&staff)).await.body;
    assert_eq!(queue.as_array().map(Vec::len), Some(1));
    assert_eq!(
        reconciliation_faults(&s, &org.to_string()).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn an_observer_lists_its_entitys_invoices_and_payments_and_no_others() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("observed@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let c = charge(&s, &staff, &org, 700, "x").await;
    let inv = issue(&s, &staff, &org, "invoice", Some(vec![&c]))
        .await
        .body;
    assert_eq!(
        pay(&s, &staff, &org, payment(700, "TRY", Some(&inv)))
            .await
            .status,
        201
    );
    let tr = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await
        .body["distributor_entity_id"]
        .as_str()
        .expect("an entity")
        .to_owned();
    let (eu_owner, eu_org) = {
        let t = s.sign_in("observed-eu@example.com").await;
        let r = s.create_org(&t, "EU GmbH", "DE").await;
        (t, r.body["id"].as_str().expect("an org").to_owned())
    };
    let eu = s
        .get(&format!("/v1/organizations/{eu_org}"), Some(&eu_owner))
        .await
        .body["distributor_entity_id"]
        .as_str()
        .expect("an entity")
        .to_owned();
    let r = s
        .post(
            &format!("/v1/distributors/{tr}/staff"),
            Some(&staff),
            json!({"email": "observer@example.com", "role": "observer"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let observer = s.sign_in("observer@example.com").await;
    let invoices = s
        .get(&format!("/v1/distributors/{tr}/invoices"), Some(&observer))
        .await;
    assert_eq!(invoices.status, 200, "{:?}", invoices.body);
    assert!(invoices
        .body
        .as_array()
        .expect("a list")
        .iter()
        .any(|i| i["id"] == inv["id"]));
    let payments = s
        .get(&format!("/v1/distributors/{tr}/payments"), Some(&observer))
        .await;
    assert_eq!(payments.body.as_array().map(Vec::len), Some(1));
    for p in [
        format!("/v1/distributors/{eu}/invoices"),
        format!("/v1/distributors/{eu}/payments"),
    ] {
        assert_eq!(s.get(&p, Some(&observer)).await.status, 404, "{p}");
    }
    for p in [
        format!("/v1/distributors/{tr}/invoices"),
        format!("/v1/distributors/{tr}/payments"),
    ] {
        assert_eq!(s.get(&p, Some(&owner)).await.status, 404, "{p}");
        assert_eq!(s.get(&p, Some(&staff)).await.status, 200, "{p}");
    }
    // Not a member: the organization's own billing routes stay closed.
    assert_eq!(
        s.get(
            &format!("/v1/organizations/{org}/invoices"),
            Some(&observer)
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn the_distributor_report_counts_invoices_paid_through_payments_and_the_wallet() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("reported@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let tr = s
        .get(&format!("/v1/organizations/{org}"), Some(&owner))
        .await
        .body["distributor_entity_id"]
        .as_str()
        .expect("an entity")
        .to_owned();
    // One invoice paid by a recorded transfer, one from the wallet, one
    // only in part (not counted).
    let mut invoices = Vec::new();
    for amount in [40_000, 25_000, 9_000] {
        let c = charge(&s, &staff, &org, amount, "month").await;
        invoices.push(
            issue(&s, &staff, &org, "invoice", Some(vec![&c]))
                .await
                .body,
        );
    }
    assert_eq!(
        pay(&s, &staff, &org, payment(40_000, "TRY", Some(&invoices[0])))
            .await
            .status,
        201
    );
    s.credit(&staff, &org, 25_000).await;
    let id = invoices[1]["id"].as_str().expect("an id");
    let r = s
        .post(
            &format!("/v1/admin/invoices/{id}/pay-from-wallet"),
            Some(&staff),
            json!({"amount_minor": 25_000}),
        )
        .await;
    assert_eq!(r.body["status"], "paid");
    assert_eq!(
        pay(&s, &staff, &org, payment(1_000, "TRY", Some(&invoices[2])))
            .await
            .status,
        201
    );
    let now = time::OffsetDateTime::now_utc();
    let month = format!("{}-{:02}", now.year(), u8::from(now.month()));
    let r = s
        .get(
            &format!("/v1/distributors/{tr}/report?month={month}"),
            Some(&staff),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let pct = r.body["profit_pct"].as_f64().expect("a share");
    let try_row = r.body["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .find(|c| c["currency"] == "TRY")
        .cloned()
        .expect("a TRY row");
    assert_eq!(try_row["paid_invoices"], 2);
    assert_eq!(try_row["paid_total_minor"], 65_000);
    let share = (65_000.0 * pct / 100.0).floor() as i64;
    assert_eq!(try_row["share_minor"], share);
}

// --- security review 3: one bank transfer, credited once (issue 32) ----------

async fn invoice_paid(s: &TestStack, org: &str, inv: &Value, token: &str) -> i64 {
    let path = format!(
        "/v1/organizations/{org}/invoices/{}",
        inv["id"].as_str().expect("an id")
    );
    s.get(&path, Some(token)).await.body["paid_minor"]
        .as_i64()
        .expect("paid_minor")
}

#[tokio::test]
async fn two_claims_of_one_transfer_are_flagged_and_approved_once_unless_staff_confirm() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("twin-claims@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let staff = s.sign_in(STAFF).await;
    let c = charge(&s, &staff, &org, 20_000, "month").await;
    let inv = issue(&s, &staff, &org, "invoice", Some(vec![&c]))
        .await
        .body;
    let claims = format!("/v1/organizations/{org}/payment-claims");
    let claim = |reference: &str| {
        let body = json!({"amount_minor": 9_000, "currency": "TRY", "reference": reference,
                          "invoice_id": inv["id"]});
        let (s, claims, finance) = (&s, claims.clone(), finance.clone());
        async move { s.post(&claims, Some(&finance), body).await }
    };
    let a = claim("EFT 2026-11-20 #555").await;
    let b = claim("eft 2026-11-20 #555").await;
    assert_eq!(
        (a.status, b.status),
        (201, 201),
        "{:?} {:?}",
        a.body,
        b.body
    );
    let (a, b) = (
        a.body["id"].as_str().expect("an id").to_owned(),
        b.body["id"].as_str().expect("an id").to_owned(),
    );

    // The staff queue shows each as a possible duplicate of the other.
    let q = s.get("/v1/admin/payment-claims", Some(&staff)).await.body;
    let dup = |id: &String| {
        q.as_array()
            .expect("a list")
            .iter()
            .find(|c| c["id"] == id.as_str())
            .map(|c| c["duplicate_of"].clone())
            .expect("queued")
    };
    assert_eq!((dup(&a), dup(&b)), (json!(b), json!(a)));

    // Approved at once: one wins, the other is refused naming the winner.
    let approve = |id: &str, body: Value| {
        let (s, staff) = (&s, staff.clone());
        let path = format!("/v1/admin/payment-claims/{id}/approve");
        async move { s.post(&path, Some(&staff), body).await }
    };
    let (ra, rb) = tokio::join!(
        approve(a.as_str(), json!({})),
        approve(b.as_str(), json!({}))
    );
    let mut statuses = [ra.status, rb.status];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{:?} {:?}", ra.body, rb.body);
    let (winner, loser, refused) = if ra.status == 200 {
        (&a, &b, rb)
    } else {
        (&b, &a, ra)
    };
    assert!(
        refused.error().contains(&format!("duplicate_of {winner}")),
        "{:?}",
        refused.body
    );
    assert_eq!(invoice_paid(&s, &org, &inv, &owner).await, 9_000);
    // Still pending, and still flagged, now against the approved one.
    assert_eq!(
        s.get("/v1/admin/payment-claims", Some(&staff))
            .await
            .body
            .as_array()
            .expect("a list")
            .iter()
            .find(|c| c["id"] == loser.as_str())
            .map(|c| c["duplicate_of"].clone()),
        Some(json!(winner))
    );
    // Staff checked the statement: it is another transfer.
    let r = approve(loser.as_str(), json!({"confirm_duplicate": true})).await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (200, Some("approved"))
    );
    assert_eq!(invoice_paid(&s, &org, &inv, &owner).await, 18_000);
    assert_eq!(reconciliation_faults(&s, &org).await, Vec::<String>::new());
}

#[tokio::test]
async fn claims_on_a_proforma_a_void_or_a_paid_invoice_are_409_and_no_remainder_is_credited_unasked(
) {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("claim-states@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let staff = s.sign_in(STAFF).await;
    let claims = format!("/v1/organizations/{org}/payment-claims");
    let claim = |inv: &Value, amount: i64, reference: &str| {
        let body = json!({"amount_minor": amount, "currency": "TRY", "reference": reference,
                          "invoice_id": inv["id"]});
        let (s, claims, finance) = (&s, claims.clone(), finance.clone());
        async move { s.post(&claims, Some(&finance), body).await }
    };
    let doc = |amount: i64, kind: &'static str| {
        let (s, staff, org) = (&s, staff.clone(), org.clone());
        async move {
            let c = charge(s, &staff, &org, amount, "month").await;
            let d = issue(s, &staff, &org, kind, Some(vec![&c])).await;
            assert_eq!(d.status, 201, "{:?}", d.body);
            d.body
        }
    };
    let pf = doc(1_000, "proforma").await;
    let r = claim(&pf, 1_000, "EFT pf").await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("proforma"), "{:?}", r.body);

    let void = doc(1_000, "invoice").await;
    let id = void["id"].as_str().expect("an id");
    let v = s
        .post(
            &format!("/v1/admin/invoices/{id}/void"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(v.status, 200, "{:?}", v.body);
    let r = claim(&void, 1_000, "EFT void").await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("the invoice is void"), "{:?}", r.body);

    let paid = doc(1_000, "invoice").await;
    let p = pay(&s, &staff, &org, payment(1_000, "TRY", Some(&paid))).await;
    assert_eq!(p.status, 201, "{:?}", p.body);
    let r = claim(&paid, 1_000, "EFT paid").await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("the invoice is paid"), "{:?}", r.body);

    // A claim made while the invoice was open, approved after it was paid:
    // nothing goes to the wallet unless staff ask for it.
    let open = doc(2_000, "invoice").await;
    let late = claim(&open, 2_000, "EFT late").await;
    assert_eq!(late.status, 201, "{:?}", late.body);
    let mut full = payment(2_000, "TRY", Some(&open));
    full["reference"] = json!("EFT other");
    assert_eq!(pay(&s, &staff, &org, full).await.status, 201);
    let approve = |id: &str, body: Value| {
        let (s, staff) = (&s, staff.clone());
        let path = format!("/v1/admin/payment-claims/{id}/approve");
        async move { s.post(&path, Some(&staff), body).await }
    };
    let late = late.body["id"].as_str().expect("an id");
    let r = approve(late, json!({})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("the invoice is paid"), "{:?}", r.body);
    assert_eq!(wallet(&s, &owner, &org).await, 0);

    // More than the invoice owes: 409, then credited when asked for.
    let part = doc(5_000, "invoice").await;
    let over = claim(&part, 8_000, "EFT over").await;
    let over = over.body["id"].as_str().expect("an id");
    let r = approve(over, json!({})).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("credit_remainder"), "{:?}", r.body);
    assert_eq!(wallet(&s, &owner, &org).await, 0);
    let r = approve(over, json!({"credit_remainder": true})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(wallet(&s, &owner, &org).await, 3_000);
    assert_eq!(invoice_paid(&s, &org, &part, &owner).await, 5_000);
    assert_eq!(reconciliation_faults(&s, &org).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_transfer_recorded_again_under_a_new_idempotency_key_needs_confirm_duplicate() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("twin-payments@example.com").await;
    let staff = s.sign_in(STAFF).await;
    let keyed = |key: String, body: Value| {
        let (s, staff, org) = (&s, staff.clone(), org.clone());
        async move {
            s.call(
                "POST",
                &format!("{}/v1/admin/organizations/{org}/payments", s.core()),
                Some(&staff),
                Some(body),
                &[("idempotency-key", key.as_str())],
            )
            .await
        }
    };
    let transfer = |reference: &str, confirm: bool| {
        let mut b = payment(1_000, "TRY", None);
        b["reference"] = json!(reference);
        if confirm {
            b["confirm_duplicate"] = json!(true);
        }
        b
    };
    let first = keyed("k-1".into(), transfer("EFT 9", false)).await;
    assert_eq!(first.status, 201, "{:?}", first.body);
    let first_id = first.body["id"].as_str().expect("an id").to_owned();
    for (key, reference) in [("k-2", "EFT 9"), ("k-3", "eft 9")] {
        let r = keyed(key.into(), transfer(reference, false)).await;
        assert_eq!(r.status, 409, "{key}: {:?}", r.body);
        assert!(
            r.error().contains(&format!("duplicate_of {first_id}")),
            "{:?}",
            r.body
        );
    }
    assert_eq!(wallet(&s, &owner, &org).await, 1_000);
    let r = keyed("k-4".into(), transfer("EFT 9", true)).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(wallet(&s, &owner, &org).await, 2_000);

    // A new transfer sent twice at once under two keys: recorded once.
    let (a, b) = tokio::join!(
        keyed("k-5".into(), transfer("EFT 10", false)),
        keyed("k-6".into(), transfer("EFT 10", false))
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [201, 409], "{:?} {:?}", a.body, b.body);
    assert_eq!(wallet(&s, &owner, &org).await, 3_000);
    // A claim of a transfer already recorded is not approved without a check.
    let finance = s.member(&owner, &org, "finance").await;
    let c = s
        .post(
            &format!("/v1/organizations/{org}/payment-claims"),
            Some(&finance),
            json!({"amount_minor": 1_000, "currency": "TRY", "reference": "EFT 10"}),
        )
        .await;
    assert_eq!(c.status, 201, "{:?}", c.body);
    let r = s
        .post(
            &format!(
                "/v1/admin/payment-claims/{}/approve",
                c.body["id"].as_str().expect("an id")
            ),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert!(r.error().contains("duplicate_of"), "{:?}", r.body);
    assert_eq!(wallet(&s, &owner, &org).await, 3_000);
    assert_eq!(reconciliation_faults(&s, &org).await, Vec::<String>::new());
}

#[tokio::test]
async fn amounts_and_prices_beyond_the_money_bound_are_400() {
    let s = TestStack::spawn().await;
    let (owner, org) = s.org_with_owner("bounds@example.com").await;
    let finance = s.member(&owner, &org, "finance").await;
    let staff = s.sign_in(STAFF).await;
    let max = hub_domain::MAX_MINOR;
    let over = max + 1;
    let r = s
        .post(
            &format!("/v1/admin/organizations/{org}/charges"),
            Some(&staff),
            json!({"description": "big", "brand": "Servers", "amount_minor": over}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(r.error().contains(&max.to_string()), "{:?}", r.body);
    charge(&s, &staff, &org, max, "the largest").await;
    assert_eq!(
        pay(&s, &staff, &org, payment(over, "TRY", None))
            .await
            .status,
        400
    );
    let r = s
        .post(
            &format!("/v1/organizations/{org}/payment-claims"),
            Some(&finance),
            json!({"amount_minor": over, "currency": "TRY", "reference": "EFT big"}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    // SKU prices, on creation and on change.
    let r = crate::servers::p_call(
        &s,
        "POST",
        "/v1/admin/skus",
        Some(&staff),
        Some(
            json!({"id": "too-dear", "name": "Too dear", "fulfilment": "api",
                    "monthly_price_minor": over, "currency": "TRY"}),
        ),
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(r.error().contains("monthly_price_minor"), "{:?}", r.body);
    let r = crate::servers::p_call(
        &s,
        "PATCH",
        "/v1/admin/skus/vps-small",
        Some(&staff),
        Some(json!({"monthly_price_minor": over})),
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = crate::servers::p_call(
        &s,
        "PATCH",
        "/v1/admin/skus/vps-small",
        Some(&staff),
        Some(json!({"monthly_price_minor": max})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn a_billing_run_isolates_an_organization_whose_total_would_overflow() {
    let s = TestStack::spawn().await;
    let staff = s.sign_in(STAFF).await;
    let orgs = usage_orgs(&s, 3, 2, "2026-09").await;
    // Charges written before amounts were bounded: two that no int64 total
    // holds.
    let bad = orgs[1];
    sqlx::query!(
        "UPDATE org_billing.charges SET qty = 1, unit_minor = 5000000000000000000, \
                amount_minor = 5000000000000000000 WHERE org_id = $1",
        bad,
    )
    .execute(&s.db)
    .await
    .expect("updated");
    let start = || {
        s.post(
            "/v1/admin/billing-runs",
            Some(&staff),
            json!({"period": "2026-09"}),
        )
    };
    let run = start().await;
    assert_eq!(run.status, 201, "{:?}", run.body);
    assert_eq!(
        (run.body["invoices"].as_i64(), run.body["status"].as_str()),
        (Some(2), Some("done")),
        "{:?}",
        run.body
    );
    let failed = run.body["failed"].as_array().expect("failed");
    assert_eq!(failed.len(), 1, "{:?}", run.body);
    assert_eq!(failed[0]["org_id"], bad.to_string());
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("largest amount")),
        "{:?}",
        run.body
    );
    let pending = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM org_billing.charges WHERE org_id = $1 AND status = 'pending'"#,
        bad,
    )
    .fetch_one(&s.db)
    .await
    .expect("counted");
    assert_eq!(pending, 2);
    // Mended (one charge waived), the run started again invoices it.
    let one: Uuid = sqlx::query_scalar!(
        "SELECT id FROM org_billing.charges WHERE org_id = $1 ORDER BY id LIMIT 1",
        bad,
    )
    .fetch_one(&s.db)
    .await
    .expect("a charge");
    let w = s
        .post(
            &format!("/v1/admin/charges/{one}/waive"),
            Some(&staff),
            json!({}),
        )
        .await;
    assert_eq!(w.status, 200, "{:?}", w.body);
    let again = start().await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(again.body["invoices"].as_i64(), Some(3), "{:?}", again.body);
    assert_eq!(again.body["failed"], json!([]));
}
