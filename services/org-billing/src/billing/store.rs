//! The SQL of the billing records, checked at compile time. Every write
//! transaction on an organization's billing takes that organization's row
//! first ([`lock_org`]), then documents, then charges, then counters, then
//! the wallet: one order everywhere, so they never deadlock.

use super::model::{
    Charge, ChargeStatus, ClaimStatus, Invoice, InvoiceLine, InvoiceStatus, Kind, Method, Payment,
    PaymentClaim, Source,
};
use hub_domain::{
    ChargeId, ClaimId, Currency, DistributorId, InvoiceId, MinorUnits, OrgId, PaymentId, RunId,
    UserId,
};
use service_kit::page::After;
use sqlx::{PgConnection, PgPool};
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// What billing needs of an organization: its entity and wallet currency.
pub struct Billed {
    pub distributor_id: DistributorId,
    pub currency: Currency,
}

/// Lock the organization's row (`FOR NO KEY UPDATE`: rows referencing it can
/// still be inserted) for the rest of the transaction; None when there is none.
pub async fn lock_org(conn: &mut PgConnection, org: OrgId) -> sqlx::Result<Option<Billed>> {
    sqlx::query_as!(
        Billed,
        r#"SELECT o.distributor_id AS "distributor_id: DistributorId", w.currency AS "currency: Currency" FROM organizations o
         JOIN wallets w ON w.org_id = o.id WHERE o.id = $1 FOR NO KEY UPDATE OF o"#,
        org as OrgId,
    )
    .fetch_optional(conn)
    .await
}

/// Whether the organization exists.
pub async fn org_exists(pool: &PgPool, org: OrgId) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1) AS "e!""#,
        org as OrgId
    )
    .fetch_one(pool)
    .await
}

// ---- charges ---------------------------------------------------------------

pub struct NewCharge<'a> {
    pub org_id: OrgId,
    pub description: &'a str,
    pub brand: &'a str,
    pub qty: i32,
    pub unit_minor: MinorUnits,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub source: Source,
    /// Usage charges: the usage period it bills (`usage:<id>`); a second
    /// charge with the same reference is not made.
    pub source_ref: Option<&'a str>,
    /// Usage charges: the month a billing run invoices it in.
    pub period: Option<&'a str>,
    pub created_by: Option<UserId>,
}

/// Insert a pending charge: None when one with its `source_ref` exists.
pub async fn insert_charge(
    conn: &mut PgConnection,
    c: &NewCharge<'_>,
) -> sqlx::Result<Option<Charge>> {
    sqlx::query_as!(
        Charge,
        r#"INSERT INTO charges (id, org_id, description, brand, qty, unit_minor, amount_minor,
                                currency, source, source_ref, period, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
           ON CONFLICT (source_ref) DO NOTHING
           RETURNING id AS "id: ChargeId", org_id AS "org_id: OrgId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                     amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", status AS "status: ChargeStatus",
                  source AS "source: Source", period, invoice_id AS "invoice_id: InvoiceId", created_at"#,
        ChargeId::new() as ChargeId,
        c.org_id as OrgId,
        c.description,
        c.brand,
        c.qty,
        c.unit_minor as MinorUnits,
        c.amount_minor as MinorUnits,
        c.currency as Currency,
        c.source as Source,
        c.source_ref,
        c.period,
        c.created_by as Option<UserId>,
    )
    .fetch_optional(conn)
    .await
}

/// The organization's charges, newest first, optionally of one status.
pub async fn charges_of(
    pool: &PgPool,
    org: OrgId,
    status: Option<ChargeStatus>,
    after: Option<After>,
    limit: i64,
) -> sqlx::Result<Vec<Charge>> {
    let (at, id) = after.unzip();
    sqlx::query_as!(
        Charge,
        r#"SELECT id AS "id: ChargeId", org_id AS "org_id: OrgId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                  amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", status AS "status: ChargeStatus",
                  source AS "source: Source", period, invoice_id AS "invoice_id: InvoiceId", created_at
             FROM charges
            WHERE org_id = $1 AND ($2::text IS NULL OR status = $2)
              AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))
            ORDER BY created_at DESC, id DESC LIMIT $5"#,
        org as OrgId,
        status as Option<ChargeStatus>,
        at,
        id,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// Waive a pending charge: the charge as it is now, or None when it is not
/// pending (or not there: [`charge_org`] tells which).
pub async fn waive(conn: &mut PgConnection, id: ChargeId) -> sqlx::Result<Option<Charge>> {
    sqlx::query_as!(
        Charge,
        r#"UPDATE charges SET status = 'waived' WHERE id = $1 AND status = 'pending'
           RETURNING id AS "id: ChargeId", org_id AS "org_id: OrgId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                     amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", status AS "status: ChargeStatus",
                  source AS "source: Source", period, invoice_id AS "invoice_id: InvoiceId", created_at"#,
        id as ChargeId,
    )
    .fetch_optional(conn)
    .await
}

/// The organization a charge belongs to.
pub async fn charge_org(conn: &mut PgConnection, id: ChargeId) -> sqlx::Result<Option<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT org_id AS "o: OrgId" FROM charges WHERE id = $1"#,
        id as ChargeId
    )
    .fetch_optional(conn)
    .await
}

/// Lock the charges a document is issued from: the organization's pending
/// ones (oldest first, at most `max`), or exactly `ids` (whatever their state,
/// for the caller to check). Call with the organization locked.
pub async fn lock_charges(
    conn: &mut PgConnection,
    org: OrgId,
    ids: Option<&[ChargeId]>,
    max: i64,
) -> sqlx::Result<Vec<Charge>> {
    match ids {
        None => {
            sqlx::query_as!(
                Charge,
                r#"SELECT id AS "id: ChargeId", org_id AS "org_id: OrgId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                          amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", status AS "status: ChargeStatus",
                  source AS "source: Source", period, invoice_id AS "invoice_id: InvoiceId", created_at
                     FROM charges WHERE org_id = $1 AND status = 'pending'
                    ORDER BY created_at, id LIMIT $2 FOR UPDATE"#,
                org as OrgId,
                max,
            )
            .fetch_all(conn)
            .await
        }
        Some(ids) => {
            sqlx::query_as!(
                Charge,
                r#"SELECT id AS "id: ChargeId", org_id AS "org_id: OrgId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                          amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", status AS "status: ChargeStatus",
                  source AS "source: Source", period, invoice_id AS "invoice_id: InvoiceId", created_at
                     FROM charges WHERE org_id = $1 AND id = ANY($2)
                    ORDER BY created_at, id FOR UPDATE"#,
                org as OrgId,
                ids as &[ChargeId],
            )
            .fetch_all(conn)
            .await
        }
    }
}

/// The charges on document `invoice`, locked, in line order.
pub async fn lock_charges_of(
    conn: &mut PgConnection,
    invoice: InvoiceId,
) -> sqlx::Result<Vec<Charge>> {
    sqlx::query_as!(
        Charge,
        r#"SELECT c.id AS "id: ChargeId", c.org_id AS "org_id: OrgId", c.description, c.brand, c.qty, c.unit_minor AS "unit_minor: MinorUnits",
                  c.amount_minor AS "amount_minor: MinorUnits", c.currency AS "currency: Currency", c.status AS "status: ChargeStatus",
                  c.source AS "source: Source", c.period, c.invoice_id AS "invoice_id: InvoiceId", c.created_at
             FROM invoice_lines l JOIN charges c ON c.id = l.charge_id
            WHERE l.invoice_id = $1 ORDER BY l.position FOR UPDATE OF c"#,
        invoice as InvoiceId,
    )
    .fetch_all(conn)
    .await
}

/// A voided proforma's charges go back to pending.
pub async fn release_quoted(conn: &mut PgConnection, invoice: InvoiceId) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "UPDATE charges SET status = 'pending', invoice_id = NULL \
         WHERE invoice_id = $1 AND status = 'quoted'",
        invoice as InvoiceId,
    )
    .execute(conn)
    .await?
    .rows_affected())
}

// ---- documents -------------------------------------------------------------

/// A document to issue from `charges` (its lines, in order).
pub struct NewDocument {
    pub id: InvoiceId,
    pub org_id: OrgId,
    pub distributor_id: DistributorId,
    pub kind: Kind,
    pub currency: Currency,
    pub charges: Vec<Charge>,
    pub subtotal_minor: MinorUnits,
    pub run_id: Option<RunId>,
    pub created_by: Option<UserId>,
}

/// Take `n` numbers of `(distributor, kind, year)`: the first of them. The
/// counter row stays locked until the transaction ends, and a rollback gives
/// the numbers back, so numbers have no gaps.
async fn take_numbers(
    conn: &mut PgConnection,
    distributor: DistributorId,
    kind: Kind,
    year: i32,
    n: i64,
) -> sqlx::Result<i64> {
    let last = sqlx::query_scalar!(
        "INSERT INTO document_counters (distributor_id, kind, year, last) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (distributor_id, kind, year) \
         DO UPDATE SET last = document_counters.last + EXCLUDED.last RETURNING last",
        distributor as DistributorId,
        kind as Kind,
        year,
        n,
    )
    .fetch_one(conn)
    .await?;
    Ok(last - n + 1)
}

/// Issue `docs` at `issued_at` (due `due_days` later) in the caller's
/// transaction, their charges already locked: numbers taken per counter (in
/// key order, so concurrent issuers lock counters in one order), then one
/// statement each for the documents, their lines and their charges' new
/// state. Returns each document's number, in order.
pub async fn issue(
    conn: &mut PgConnection,
    docs: &[NewDocument],
    issued_at: OffsetDateTime,
    due_days: i64,
) -> sqlx::Result<Vec<String>> {
    let year = issued_at.year();
    let mut counters: BTreeMap<(DistributorId, Kind), Vec<usize>> = BTreeMap::new();
    for (i, d) in docs.iter().enumerate() {
        counters
            .entry((d.distributor_id, d.kind))
            .or_default()
            .push(i);
    }
    let mut numbers = vec![String::new(); docs.len()];
    for ((distributor, kind), which) in &counters {
        let first = take_numbers(&mut *conn, *distributor, *kind, year, which.len() as i64).await?;
        for (k, &i) in which.iter().enumerate() {
            numbers[i] = super::model::number(*kind, year, first + k as i64);
        }
    }
    let due_at = issued_at + time::Duration::days(due_days);
    sqlx::query!(
        r#"INSERT INTO invoices (id, org_id, distributor_id, kind, number, currency,
                                 subtotal_minor, total_minor, issued_at, due_at, run_id, created_by)
           SELECT d.id, d.org, d.dist, d.kind, d.number, d.currency, d.subtotal, d.subtotal,
                  $8, $9, d.run, d.by
             FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[],
                         $7::bigint[], $10::uuid[], $11::uuid[])
                  AS d(id, org, dist, kind, number, currency, subtotal, run, by)"#,
        &docs.iter().map(|d| d.id).collect::<Vec<_>>() as &[InvoiceId],
        &docs.iter().map(|d| d.org_id).collect::<Vec<_>>() as &[OrgId],
        &docs.iter().map(|d| d.distributor_id).collect::<Vec<_>>() as &[DistributorId],
        &docs.iter().map(|d| d.kind).collect::<Vec<_>>() as &[Kind],
        &numbers,
        &docs.iter().map(|d| d.currency).collect::<Vec<_>>() as &[Currency],
        &docs.iter().map(|d| d.subtotal_minor).collect::<Vec<_>>() as &[MinorUnits],
        issued_at,
        due_at,
        &docs.iter().map(|d| d.run_id).collect::<Vec<_>>() as &[Option<RunId>],
        &docs.iter().map(|d| d.created_by).collect::<Vec<_>>() as &[Option<UserId>],
    )
    .execute(&mut *conn)
    .await?;
    let lines = docs
        .iter()
        .flat_map(|d| d.charges.iter().enumerate().map(move |(i, c)| (d, i, c)));
    let (mut inv, mut pos, mut charge, mut status) = (vec![], vec![], vec![], vec![]);
    let (mut desc, mut brand, mut qty, mut unit, mut amount) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (d, i, c) in lines {
        inv.push(d.id);
        pos.push(i as i32 + 1);
        charge.push(c.id);
        status.push(d.kind.charge_status());
        desc.push(c.description.as_str());
        brand.push(c.brand.as_str());
        qty.push(c.qty);
        unit.push(c.unit_minor);
        amount.push(c.amount_minor);
    }
    sqlx::query!(
        r#"INSERT INTO invoice_lines (invoice_id, position, charge_id, description, brand, qty,
                                      unit_minor, amount_minor)
           SELECT * FROM unnest($1::uuid[], $2::int[], $3::uuid[], $4::text[], $5::text[],
                                $6::int[], $7::bigint[], $8::bigint[])"#,
        &inv as &[InvoiceId],
        &pos,
        &charge as &[ChargeId],
        &desc as &[&str],
        &brand as &[&str],
        &qty,
        &unit as &[MinorUnits],
        &amount as &[MinorUnits],
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE charges c SET status = u.status, invoice_id = u.inv \
         FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS u(id, inv, status) WHERE c.id = u.id",
        &charge as &[ChargeId],
        &inv as &[InvoiceId],
        &status as &[ChargeStatus],
    )
    .execute(&mut *conn)
    .await?;
    Ok(numbers)
}

/// A document (of `org`, when given: another organization's is None).
pub async fn invoice(
    conn: &mut PgConnection,
    id: InvoiceId,
    org: Option<OrgId>,
) -> sqlx::Result<Option<Invoice>> {
    sqlx::query_as!(
        Invoice,
        r#"SELECT id AS "id: InvoiceId", org_id AS "org_id: OrgId", distributor_id AS "distributor_id: DistributorId", number, kind AS "kind: Kind",
                  status AS "status!: InvoiceStatus", currency AS "currency: Currency", subtotal_minor AS "subtotal_minor: MinorUnits", tax_minor AS "tax_minor: MinorUnits", total_minor AS "total_minor: MinorUnits", paid_minor AS "paid_minor: MinorUnits", issued_at, due_at,
                  paid_at, voided_at, legal_document_url, converted_to AS "converted_to: InvoiceId", run_id AS "run_id: RunId"
             FROM invoices WHERE id = $1 AND ($2::uuid IS NULL OR org_id = $2)"#,
        id as InvoiceId,
        org as Option<OrgId>,
    )
    .fetch_optional(conn)
    .await
}

/// The document, locked for the rest of the transaction.
pub async fn lock_invoice(conn: &mut PgConnection, id: InvoiceId) -> sqlx::Result<Option<Invoice>> {
    sqlx::query_as!(
        Invoice,
        r#"SELECT id AS "id: InvoiceId", org_id AS "org_id: OrgId", distributor_id AS "distributor_id: DistributorId", number, kind AS "kind: Kind",
                  status AS "status!: InvoiceStatus", currency AS "currency: Currency", subtotal_minor AS "subtotal_minor: MinorUnits", tax_minor AS "tax_minor: MinorUnits", total_minor AS "total_minor: MinorUnits", paid_minor AS "paid_minor: MinorUnits", issued_at, due_at,
                  paid_at, voided_at, legal_document_url, converted_to AS "converted_to: InvoiceId", run_id AS "run_id: RunId"
             FROM invoices WHERE id = $1 FOR UPDATE"#,
        id as InvoiceId,
    )
    .fetch_optional(conn)
    .await
}

/// Which organization a document belongs to (to lock it first).
pub async fn invoice_org(conn: &mut PgConnection, id: InvoiceId) -> sqlx::Result<Option<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT org_id AS "o: OrgId" FROM invoices WHERE id = $1"#,
        id as InvoiceId
    )
    .fetch_optional(conn)
    .await
}

pub async fn lines(pool: &PgPool, invoice: InvoiceId) -> sqlx::Result<Vec<InvoiceLine>> {
    sqlx::query_as!(
        InvoiceLine,
        r#"SELECT position, charge_id AS "charge_id: ChargeId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                  amount_minor AS "amount_minor: MinorUnits"
             FROM invoice_lines WHERE invoice_id = $1 ORDER BY position"#,
        invoice as InvoiceId,
    )
    .fetch_all(pool)
    .await
}

/// Which documents a list shows: one organization's, or one entity's.
#[derive(Clone, Copy)]
pub enum Owner {
    Org(OrgId),
    Distributor(DistributorId),
}

impl Owner {
    fn split(self) -> (Option<OrgId>, Option<DistributorId>) {
        match self {
            Owner::Org(o) => (Some(o), None),
            Owner::Distributor(d) => (None, Some(d)),
        }
    }
}

/// Documents newest first, optionally of one kind and status.
pub async fn invoices(
    pool: &PgPool,
    owner: Owner,
    kind: Option<Kind>,
    status: Option<InvoiceStatus>,
    after: Option<After>,
    limit: i64,
) -> sqlx::Result<Vec<Invoice>> {
    let (org, dist) = owner.split();
    let (at, id) = after.unzip();
    sqlx::query_as!(
        Invoice,
        r#"SELECT id AS "id: InvoiceId", org_id AS "org_id: OrgId", distributor_id AS "distributor_id: DistributorId", number, kind AS "kind: Kind",
                  status AS "status!: InvoiceStatus", currency AS "currency: Currency", subtotal_minor AS "subtotal_minor: MinorUnits", tax_minor AS "tax_minor: MinorUnits", total_minor AS "total_minor: MinorUnits", paid_minor AS "paid_minor: MinorUnits", issued_at, due_at,
                  paid_at, voided_at, legal_document_url, converted_to AS "converted_to: InvoiceId", run_id AS "run_id: RunId"
             FROM invoices
            WHERE ($1::uuid IS NULL OR org_id = $1) AND ($2::uuid IS NULL OR distributor_id = $2)
              AND ($3::text IS NULL OR kind = $3) AND ($4::text IS NULL OR status = $4)
              AND ($5::timestamptz IS NULL OR (issued_at, id) < ($5, $6))
            ORDER BY issued_at DESC, id DESC LIMIT $7"#,
        org as Option<OrgId>,
        dist as Option<DistributorId>,
        kind as Option<Kind>,
        status as Option<InvoiceStatus>,
        at,
        id,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// Void a document (its paid_minor is 0: the caller checked, and Postgres
/// refuses otherwise); `converted_to` when a conversion voids a proforma.
pub async fn void(
    conn: &mut PgConnection,
    id: InvoiceId,
    converted_to: Option<InvoiceId>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE invoices SET voided_at = now(), converted_to = $2 WHERE id = $1",
        id as InvoiceId,
        converted_to as Option<InvoiceId>,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn set_legal_document(
    conn: &mut PgConnection,
    id: InvoiceId,
    url: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE invoices SET legal_document_url = $2 WHERE id = $1",
        id as InvoiceId,
        url
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Apply `amount` to a locked document's paid_minor (the caller checked it
/// fits); paid_at is set when that pays it in full.
pub async fn add_paid(
    conn: &mut PgConnection,
    id: InvoiceId,
    amount: MinorUnits,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE invoices SET paid_minor = paid_minor + $2, \
         paid_at = CASE WHEN paid_minor + $2 = total_minor THEN now() ELSE NULL END WHERE id = $1",
        id as InvoiceId,
        amount as MinorUnits,
    )
    .execute(conn)
    .await?;
    Ok(())
}

// ---- payments --------------------------------------------------------------

pub struct NewPayment<'a> {
    pub id: PaymentId,
    pub org_id: OrgId,
    pub invoice_id: Option<InvoiceId>,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub method: Method,
    pub reference: &'a str,
    pub received_at: time::Date,
    pub note: &'a str,
    pub applied_minor: MinorUnits,
    pub wallet_transaction_id: Option<i64>,
    pub claim_id: Option<ClaimId>,
    /// Staff confirmed it is another transfer than the payment with the same
    /// (reference, amount, currency, day): it leaves `payments_one_transfer`.
    pub duplicate_confirmed: bool,
    pub created_by: UserId,
}

/// The first payment of the organization with the same reference (whatever
/// its case), amount, currency and day received (any day when None), if any.
pub async fn duplicate_payment(
    conn: &mut PgConnection,
    org: OrgId,
    reference: &str,
    amount: MinorUnits,
    currency: Currency,
    received_at: Option<time::Date>,
) -> sqlx::Result<Option<PaymentId>> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id: PaymentId" FROM payments
            WHERE org_id = $1 AND lower(reference) = lower($2)
              AND amount_minor = $3 AND currency = $4 AND ($5::date IS NULL OR received_at = $5)
            ORDER BY created_at, id LIMIT 1"#,
        org as OrgId,
        reference,
        amount as MinorUnits,
        currency as Currency,
        received_at,
    )
    .fetch_optional(conn)
    .await
}

pub async fn insert_payment(conn: &mut PgConnection, p: &NewPayment<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO payments (id, org_id, invoice_id, amount_minor, currency, method, reference, \
                               received_at, note, applied_minor, wallet_transaction_id, claim_id, \
                               created_by, duplicate_confirmed) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        p.id as PaymentId,
        p.org_id as OrgId,
        p.invoice_id as Option<InvoiceId>,
        p.amount_minor as MinorUnits,
        p.currency as Currency,
        p.method as Method,
        p.reference,
        p.received_at,
        p.note,
        p.applied_minor as MinorUnits,
        p.wallet_transaction_id,
        p.claim_id as Option<ClaimId>,
        p.created_by as UserId,
        p.duplicate_confirmed,
    )
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn payment(conn: &mut PgConnection, id: PaymentId) -> sqlx::Result<Payment> {
    sqlx::query_as!(
        Payment,
        r#"SELECT p.id AS "id: PaymentId", p.org_id AS "org_id: OrgId", p.invoice_id AS "invoice_id: InvoiceId", i.number AS "invoice_number?",
                  p.amount_minor AS "amount_minor: MinorUnits", p.currency AS "currency: Currency", p.method AS "method: Method", p.reference,
                  to_char(p.received_at, 'YYYY-MM-DD') AS "received_at!", p.note, p.applied_minor AS "applied_minor: MinorUnits",
                  p.wallet_transaction_id, p.claim_id AS "claim_id: ClaimId", p.created_at
             FROM payments p LEFT JOIN invoices i ON i.id = p.invoice_id WHERE p.id = $1"#,
        id as PaymentId,
    )
    .fetch_one(conn)
    .await
}

/// Payments newest first (by date received, then recorded).
pub async fn payments(
    pool: &PgPool,
    owner: Owner,
    after: Option<After>,
    limit: i64,
) -> sqlx::Result<Vec<Payment>> {
    let (org, dist) = owner.split();
    let (at, id) = after.unzip();
    sqlx::query_as!(
        Payment,
        r#"SELECT p.id AS "id: PaymentId", p.org_id AS "org_id: OrgId", p.invoice_id AS "invoice_id: InvoiceId", i.number AS "invoice_number?",
                  p.amount_minor AS "amount_minor: MinorUnits", p.currency AS "currency: Currency", p.method AS "method: Method", p.reference,
                  to_char(p.received_at, 'YYYY-MM-DD') AS "received_at!", p.note, p.applied_minor AS "applied_minor: MinorUnits",
                  p.wallet_transaction_id, p.claim_id AS "claim_id: ClaimId", p.created_at
             FROM payments p LEFT JOIN invoices i ON i.id = p.invoice_id
            WHERE ($1::uuid IS NULL OR p.org_id = $1)
              AND ($2::uuid IS NULL OR p.org_id IN
                     (SELECT o.id FROM organizations o WHERE o.distributor_id = $2))
              AND ($3::timestamptz IS NULL OR (p.created_at, p.id) < ($3, $4))
            ORDER BY p.created_at DESC, p.id DESC LIMIT $5"#,
        org as Option<OrgId>,
        dist as Option<DistributorId>,
        at,
        id,
        limit,
    )
    .fetch_all(pool)
    .await
}

pub async fn insert_settlement(
    conn: &mut PgConnection,
    invoice: InvoiceId,
    org: OrgId,
    amount: MinorUnits,
    wallet_transaction_id: i64,
    by: UserId,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO wallet_settlements (id, invoice_id, org_id, amount_minor, \
                                         wallet_transaction_id, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        uuid::Uuid::now_v7(),
        invoice as InvoiceId,
        org as OrgId,
        amount as MinorUnits,
        wallet_transaction_id,
        by as UserId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

// ---- claims ----------------------------------------------------------------

pub struct NewClaim<'a> {
    pub org_id: OrgId,
    pub invoice_id: Option<InvoiceId>,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub reference: &'a str,
    pub note: &'a str,
    pub created_by: UserId,
}

pub async fn pending_claims_of(conn: &mut PgConnection, org: OrgId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM payment_claims WHERE org_id = $1 AND status = 'pending'"#,
        org as OrgId,
    )
    .fetch_one(conn)
    .await
}

pub async fn insert_claim(conn: &mut PgConnection, c: &NewClaim<'_>) -> sqlx::Result<PaymentClaim> {
    sqlx::query_as!(
        PaymentClaim,
        r#"INSERT INTO payment_claims (id, org_id, invoice_id, amount_minor, currency, reference,
                                       note, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           RETURNING id AS "id: ClaimId", org_id AS "org_id: OrgId", NULL::text AS org_name, invoice_id AS "invoice_id: InvoiceId",
                     amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", reference, note, status AS "status: ClaimStatus",
                  review_notes, payment_id AS "payment_id: PaymentId",
                     created_at, reviewed_at, NULL::uuid AS "duplicate_of: ClaimId""#,
        ClaimId::new() as ClaimId,
        c.org_id as OrgId,
        c.invoice_id as Option<InvoiceId>,
        c.amount_minor as MinorUnits,
        c.currency as Currency,
        c.reference,
        c.note,
        c.created_by as UserId,
    )
    .fetch_one(conn)
    .await
}

pub async fn claims_of(
    pool: &PgPool,
    org: OrgId,
    after: Option<After>,
    limit: i64,
) -> sqlx::Result<Vec<PaymentClaim>> {
    let (at, id) = after.unzip();
    sqlx::query_as!(
        PaymentClaim,
        r#"SELECT id AS "id: ClaimId", org_id AS "org_id: OrgId", NULL::text AS org_name, invoice_id AS "invoice_id: InvoiceId", amount_minor AS "amount_minor: MinorUnits",
                  currency AS "currency: Currency", reference, note, status AS "status: ClaimStatus",
                  review_notes, payment_id AS "payment_id: PaymentId", created_at,
                  reviewed_at, NULL::uuid AS "duplicate_of: ClaimId"
             FROM payment_claims WHERE org_id = $1
              AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
            ORDER BY created_at DESC, id DESC LIMIT $4"#,
        org as OrgId,
        at,
        id,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// The staff queue: pending claims, oldest first, with the organization's
/// name and `duplicate_of`: another claim of the organization (approved
/// first, else the oldest pending) with the same reference, amount and
/// currency, which may be the same transfer.
pub async fn claim_queue(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<PaymentClaim>> {
    sqlx::query_as!(
        PaymentClaim,
        r#"SELECT c.id AS "id: ClaimId", c.org_id AS "org_id: OrgId", o.name AS "org_name?", c.invoice_id AS "invoice_id: InvoiceId",
                  c.amount_minor AS "amount_minor: MinorUnits", c.currency AS "currency: Currency", c.reference, c.note,
                  c.status AS "status: ClaimStatus", c.review_notes,
                  c.payment_id AS "payment_id: PaymentId", c.created_at, c.reviewed_at,
                  (SELECT d.id FROM payment_claims d
                    WHERE d.org_id = c.org_id AND d.id <> c.id AND d.status <> 'rejected'
                      AND lower(d.reference) = lower(c.reference)
                      AND d.amount_minor = c.amount_minor AND d.currency = c.currency
                    ORDER BY d.status = 'approved' DESC, d.created_at, d.id LIMIT 1) AS "duplicate_of: ClaimId"
             FROM payment_claims c JOIN organizations o ON o.id = c.org_id
            WHERE c.status = 'pending' ORDER BY c.created_at, c.id LIMIT $1"#,
        limit,
    )
    .fetch_all(pool)
    .await
}

pub async fn claim_org(conn: &mut PgConnection, id: ClaimId) -> sqlx::Result<Option<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT org_id AS "o: OrgId" FROM payment_claims WHERE id = $1"#,
        id as ClaimId
    )
    .fetch_optional(conn)
    .await
}

pub async fn lock_claim(
    conn: &mut PgConnection,
    id: ClaimId,
) -> sqlx::Result<Option<PaymentClaim>> {
    sqlx::query_as!(
        PaymentClaim,
        r#"SELECT id AS "id: ClaimId", org_id AS "org_id: OrgId", NULL::text AS org_name, invoice_id AS "invoice_id: InvoiceId", amount_minor AS "amount_minor: MinorUnits",
                  currency AS "currency: Currency", reference, note, status AS "status: ClaimStatus",
                  review_notes, payment_id AS "payment_id: PaymentId", created_at,
                  reviewed_at, NULL::uuid AS "duplicate_of: ClaimId"
             FROM payment_claims WHERE id = $1 FOR UPDATE"#,
        id as ClaimId,
    )
    .fetch_optional(conn)
    .await
}

/// Decide a pending claim (locked by the caller): approved with its payment,
/// or rejected with notes. The claim as it is now.
pub async fn decide_claim(
    conn: &mut PgConnection,
    id: ClaimId,
    status: ClaimStatus,
    review_notes: &str,
    payment_id: Option<PaymentId>,
    duplicate_confirmed: bool,
    by: UserId,
) -> sqlx::Result<PaymentClaim> {
    sqlx::query_as!(
        PaymentClaim,
        r#"UPDATE payment_claims SET status = $2, review_notes = $3, payment_id = $4,
                  reviewed_by = $5, reviewed_at = now(), duplicate_confirmed = $6
            WHERE id = $1
        RETURNING id AS "id: ClaimId", org_id AS "org_id: OrgId", NULL::text AS org_name, invoice_id AS "invoice_id: InvoiceId", amount_minor AS "amount_minor: MinorUnits",
                  currency AS "currency: Currency", reference, note, status AS "status: ClaimStatus",
                  review_notes, payment_id AS "payment_id: PaymentId", created_at,
                  reviewed_at, NULL::uuid AS "duplicate_of: ClaimId""#,
        id as ClaimId,
        status as ClaimStatus,
        review_notes,
        payment_id as Option<PaymentId>,
        by as UserId,
        duplicate_confirmed,
    )
    .fetch_one(conn)
    .await
}

/// Another approved claim of the organization with the same reference
/// (whatever its case), amount and currency as claim `id`, if any.
pub async fn duplicate_claim(
    conn: &mut PgConnection,
    c: &PaymentClaim,
) -> sqlx::Result<Option<ClaimId>> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id: ClaimId" FROM payment_claims
            WHERE org_id = $1 AND id <> $2 AND status = 'approved'
              AND lower(reference) = lower($3) AND amount_minor = $4 AND currency = $5
            ORDER BY created_at, id LIMIT 1"#,
        c.org_id as OrgId,
        c.id as ClaimId,
        c.reference,
        c.amount_minor as MinorUnits,
        c.currency as Currency,
    )
    .fetch_optional(conn)
    .await
}

// ---- billing runs ----------------------------------------------------------

/// A billing run with its counts (read from the invoices it issued).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    pub id: RunId,
    pub period: String,
    pub status: String,
    pub organizations: i64,
    pub invoices: i64,
    pub charges: i64,
    /// Issued totals by currency.
    pub totals: serde_json::Value,
    /// The organizations this run could not invoice, `[{org_id, error}]`:
    /// their charges stay pending; starting the period's run again retries
    /// them.
    pub failed: serde_json::Value,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

/// Create the run of `period`, or find it: `(id, created)`.
pub async fn start_run(pool: &PgPool, period: &str, by: UserId) -> sqlx::Result<(RunId, bool)> {
    let created = sqlx::query_scalar!(
        r#"INSERT INTO billing_runs (id, period, started_by) VALUES ($1, $2, $3)
           ON CONFLICT (period) DO NOTHING RETURNING id AS "id: RunId""#,
        RunId::new() as RunId,
        period,
        by as UserId,
    )
    .fetch_optional(pool)
    .await?;
    if let Some(id) = created {
        return Ok((id, true));
    }
    let id = sqlx::query_scalar!(
        r#"SELECT id AS "id: RunId" FROM billing_runs WHERE period = $1"#,
        period
    )
    .fetch_one(pool)
    .await?;
    Ok((id, false))
}

pub async fn run(pool: &PgPool, id: RunId) -> sqlx::Result<Option<Run>> {
    sqlx::query_as!(
        Run,
        r#"SELECT r.id AS "id: RunId", r.period, r.status, r.started_at, r.finished_at,
                  (SELECT count(DISTINCT org_id) FROM invoices WHERE run_id = r.id) AS "organizations!",
                  (SELECT count(*) FROM invoices WHERE run_id = r.id) AS "invoices!",
                  (SELECT count(*) FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id
                    WHERE i.run_id = r.id) AS "charges!",
                  (SELECT COALESCE(jsonb_object_agg(currency, total), '{}'::jsonb) FROM
                     (SELECT currency, sum(total_minor) AS total FROM invoices
                       WHERE run_id = r.id GROUP BY currency) t) AS "totals!",
                  (SELECT COALESCE(jsonb_agg(jsonb_build_object('org_id', f.org_id, 'error', f.error)
                                             ORDER BY f.org_id), '[]'::jsonb)
                     FROM billing_run_failures f WHERE f.run_id = r.id) AS "failed!"
             FROM billing_runs r WHERE r.id = $1"#,
        id as RunId,
    )
    .fetch_optional(pool)
    .await
}

/// Up to `max` organizations with pending usage charges of `period` that no
/// other transaction holds and run `run` has not failed on, locked:
/// `(org, distributor)`, in id order.
pub async fn lock_run_orgs(
    conn: &mut PgConnection,
    run: RunId,
    period: &str,
    max: i64,
) -> sqlx::Result<Vec<(OrgId, DistributorId)>> {
    Ok(sqlx::query!(
        r#"SELECT o.id AS "id: OrgId", o.distributor_id AS "distributor_id: DistributorId"
             FROM organizations o
            WHERE o.id IN (SELECT DISTINCT org_id FROM charges
                            WHERE period = $1 AND status = 'pending' AND source = 'usage')
              AND NOT EXISTS (SELECT 1 FROM billing_run_failures f
                               WHERE f.run_id = $3 AND f.org_id = o.id)
            ORDER BY o.id LIMIT $2 FOR NO KEY UPDATE OF o SKIP LOCKED"#,
        period,
        max,
        run as RunId,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.distributor_id))
    .collect())
}

/// The pending usage charges of `period` of `orgs` (locked by the caller),
/// locked, by organization then age.
pub async fn lock_run_charges(
    conn: &mut PgConnection,
    period: &str,
    orgs: &[OrgId],
) -> sqlx::Result<Vec<Charge>> {
    sqlx::query_as!(
        Charge,
        r#"SELECT id AS "id: ChargeId", org_id AS "org_id: OrgId", description, brand, qty, unit_minor AS "unit_minor: MinorUnits",
                  amount_minor AS "amount_minor: MinorUnits", currency AS "currency: Currency", status AS "status: ChargeStatus",
                  source AS "source: Source", period, invoice_id AS "invoice_id: InvoiceId", created_at
             FROM charges
            WHERE org_id = ANY($2) AND period = $1 AND status = 'pending' AND source = 'usage'
            ORDER BY org_id, currency, created_at, id FOR UPDATE"#,
        period,
        orgs as &[OrgId],
    )
    .fetch_all(conn)
    .await
}

/// Record that run `run` could not invoice `orgs` (`(org, why)`), in the
/// caller's transaction: the run skips them from now on.
pub async fn fail_run_orgs(
    conn: &mut PgConnection,
    run: RunId,
    orgs: &[(OrgId, String)],
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO billing_run_failures (run_id, org_id, error) \
         SELECT $1, o, e FROM unnest($2::uuid[], $3::text[]) AS f(o, e) \
         ON CONFLICT (run_id, org_id) DO UPDATE SET error = EXCLUDED.error, failed_at = now()",
        run as RunId,
        &orgs.iter().map(|(o, _)| *o).collect::<Vec<_>>() as &[OrgId],
        &orgs.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Forget the organizations run `run` failed on, so working it tries them
/// again.
pub async fn clear_run_failures(pool: &PgPool, run: RunId) -> sqlx::Result<()> {
    sqlx::query!(
        "DELETE FROM billing_run_failures WHERE run_id = $1",
        run as RunId
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Mark the run done once nothing of its period is left to invoice but the
/// charges of the organizations it failed on.
pub async fn finish_run(pool: &PgPool, id: RunId, period: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE billing_runs SET status = 'done', finished_at = now() \
          WHERE id = $1 AND status = 'running' AND NOT EXISTS \
            (SELECT 1 FROM charges c WHERE c.period = $2 AND c.status = 'pending' \
                AND c.source = 'usage' AND NOT EXISTS \
                  (SELECT 1 FROM billing_run_failures f WHERE f.run_id = $1 AND f.org_id = c.org_id))",
        id as RunId,
        period,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Runs left running (a replica stopped mid-run): `(id, period)`.
pub async fn running_runs(pool: &PgPool) -> sqlx::Result<Vec<(RunId, String)>> {
    Ok(sqlx::query!(
        r#"SELECT id AS "id: RunId", period FROM billing_runs WHERE status = 'running'"#
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.id, r.period))
    .collect())
}

/// Who a document is from and to, for its preview.
pub struct Parties {
    pub org_name: String,
    pub issuer_name: String,
    pub issuer_legal_name: String,
    pub issuer_address: String,
    pub issuer_tax_id: String,
    pub bank_name: String,
    pub bank_iban: String,
    pub bank_swift: String,
}

pub async fn parties(pool: &PgPool, invoice: InvoiceId) -> sqlx::Result<Parties> {
    sqlx::query_as!(
        Parties,
        "SELECT o.name AS org_name, d.name AS issuer_name, d.legal_name AS issuer_legal_name, \
                d.address AS issuer_address, d.tax_id AS issuer_tax_id, d.bank_name, d.bank_iban, \
                d.bank_swift \
           FROM invoices i JOIN organizations o ON o.id = i.org_id \
           JOIN distributors d ON d.id = i.distributor_id WHERE i.id = $1",
        invoice as InvoiceId,
    )
    .fetch_one(pool)
    .await
}
