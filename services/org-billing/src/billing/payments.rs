//! Payments: bank transfers staff record (directly, or by approving a claim),
//! applied to an invoice up to what it still owes, the rest credited to the
//! wallet in the same transaction; and invoices paid from the wallet.

use super::{
    model::{Invoice, Kind, Method, Param},
    store::{self, Billed, Owner},
};
use crate::{
    ledger::{self, EntryKind, Wallet},
    state::AppState,
};
use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{ClaimId, Currency, InvoiceId, MinorUnits, OrgId, PaymentId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use service_kit::{
    assertion::{Caller, StaffCaller},
    idempotency, outbox, page, ApiError, ApiResult,
};
use sqlx::PgConnection;

pub const REFERENCE_MAX: usize = 200;
pub const NOTE_MAX: usize = 1000;

/// Money received, as a payment records it.
pub struct Received<'a> {
    pub invoice_id: Option<InvoiceId>,
    pub amount_minor: MinorUnits,
    pub currency: Currency,
    pub method: Method,
    pub reference: &'a str,
    pub received_at: time::Date,
    pub note: &'a str,
    pub claim_id: Option<ClaimId>,
    /// Staff confirm it is another transfer than a payment with the same
    /// reference, amount, currency and day (else 409 naming that payment).
    pub confirm_duplicate: bool,
    /// Staff choose to credit what the invoice does not take to the wallet
    /// (else 409 when the amount is more than the invoice still owes).
    pub credit_remainder: bool,
}

/// 409 for a write that a unique index refused because the transfer is
/// recorded already (a concurrent twin passed the checks first).
pub fn once(e: sqlx::Error) -> ApiError {
    let twin = matches!(
        e.as_database_error().and_then(|d| d.constraint()),
        Some("payments_one_transfer" | "payment_claims_one_transfer")
    );
    if twin {
        ApiError::conflict(
            "this transfer was recorded already: set confirm_duplicate if it is another one",
        )
    } else {
        ApiError::from(e)
    }
}

/// Record `r` for the organization `org` (locked by the caller, `billed`):
/// the invoice's remainder is paid first, anything left is credited to the
/// wallet through the ledger, only when `r.credit_remainder` says so (or no
/// invoice is named). A second payment of the same transfer (reference,
/// amount, currency, day) is refused unless `r.confirm_duplicate`; the
/// unique index `payments_one_transfer` holds that against a concurrent twin.
/// Returns the payment's id. Every refusal comes before the first write.
pub async fn record_in(
    state: &AppState,
    tx: &mut PgConnection,
    caller: &Caller,
    org: OrgId,
    billed: &Billed,
    r: Received<'_>,
) -> ApiResult<PaymentId> {
    let mut applied = MinorUnits::ZERO;
    let mut invoice = None;
    if let Some(id) = r.invoice_id {
        let doc = payable(tx, org, id).await?;
        if doc.currency != r.currency {
            return Err(ApiError::Unprocessable(format!(
                "the payment is in {} but the invoice is in {}",
                r.currency, doc.currency
            )));
        }
        let owed = owed(&doc)?;
        applied = r.amount_minor.min(owed);
        if applied < r.amount_minor && !r.credit_remainder {
            return Err(ApiError::Conflict(if owed == MinorUnits::ZERO {
                format!(
                    "the invoice is {}: set credit_remainder to credit the payment to the wallet",
                    doc.status
                )
            } else {
                format!(
                    "the invoice still owes {owed}, less than {}: set credit_remainder to credit \
                     the remaining {} to the wallet",
                    r.amount_minor,
                    less(r.amount_minor, owed)?
                )
            }));
        }
        invoice = Some(doc);
    }
    let rest = less(r.amount_minor, applied)?;
    let duplicate_of = store::duplicate_payment(
        tx,
        org,
        r.reference,
        r.amount_minor,
        r.currency,
        Some(r.received_at),
    )
    .await?;
    if let Some(other) = duplicate_of.filter(|_| !r.confirm_duplicate) {
        return Err(ApiError::Conflict(format!(
            "payment {other} has the same reference, amount and day (duplicate_of {other}): \
             set confirm_duplicate if this is another transfer"
        )));
    }
    if rest.is_positive() && billed.currency != r.currency {
        return Err(ApiError::Unprocessable(format!(
            "the payment is in {} but the wallet, which receives what no invoice takes, is in {}",
            r.currency, billed.currency
        )));
    }
    let id = PaymentId::new();
    let wallet_transaction_id = if rest.is_positive() {
        let m = ledger::wallet::move_of(
            state,
            caller,
            org,
            rest,
            EntryKind::Payment,
            format!("payment {id}"),
        )?;
        let credited = ledger::apply_one::<Wallet>(tx, &m)
            .await?
            .map_err(ApiError::from)?;
        Some(credited.transaction_id)
    } else {
        None
    };
    if let Some(doc) = invoice.as_ref().filter(|_| applied.is_positive()) {
        store::add_paid(tx, doc.id, applied).await?;
    }
    store::insert_payment(
        tx,
        &store::NewPayment {
            id,
            org_id: org,
            invoice_id: r.invoice_id,
            amount_minor: r.amount_minor,
            currency: r.currency,
            method: r.method,
            reference: r.reference,
            received_at: r.received_at,
            note: r.note,
            applied_minor: applied,
            wallet_transaction_id,
            claim_id: r.claim_id,
            duplicate_confirmed: duplicate_of.is_some(),
            created_by: caller.user_id(),
        },
    )
    .await
    .map_err(once)?;
    outbox::audit(
        tx,
        &state.naming,
        caller,
        AuditAction::PaymentRecorded,
        org,
        json!({"payment_id": id, "invoice_id": r.invoice_id,
               "invoice_number": invoice.map(|i| i.number), "amount_minor": r.amount_minor,
               "applied_minor": applied, "wallet_credit_minor": rest, "currency": r.currency,
               "method": r.method, "claim_id": r.claim_id, "duplicate_of": duplicate_of}),
    )
    .await?;
    Ok(id)
}

/// What document `doc` still owes: its total less what is paid (checked).
fn owed(doc: &Invoice) -> ApiResult<MinorUnits> {
    less(doc.total_minor, doc.paid_minor)
}

/// `a - b`, or 500 when it overflows (amounts are bounded where they enter,
/// so it never does).
fn less(a: MinorUnits, b: MinorUnits) -> ApiResult<MinorUnits> {
    a.checked_sub(b)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("{a} - {b} overflows")))
}

/// The organization's invoice `id`, locked, that a payment may go to: 404 for
/// another organization's, 422 for a proforma, 409 when void.
async fn payable(tx: &mut PgConnection, org: OrgId, id: InvoiceId) -> ApiResult<Invoice> {
    let doc = store::lock_invoice(tx, id)
        .await?
        .filter(|d| d.org_id == org)
        .ok_or_else(|| {
            ApiError::Unprocessable("invoice_id is not an invoice of this organization".into())
        })?;
    if doc.kind != Kind::Invoice {
        return Err(ApiError::Unprocessable(
            "payments apply to invoices: convert the proforma first".into(),
        ));
    }
    if doc.voided_at.is_some() {
        return Err(ApiError::conflict("the invoice is void"));
    }
    Ok(doc)
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewPayment {
    #[serde(deserialize_with = "hub_domain::integer::exact")]
    amount_minor: MinorUnits,
    currency: Currency,
    method: String,
    #[serde(default)]
    reference: String,
    /// `YYYY-MM-DD`.
    received_at: String,
    #[serde(default)]
    note: String,
    invoice_id: Option<InvoiceId>,
    #[serde(default)]
    confirm_duplicate: bool,
    #[serde(default)]
    credit_remainder: bool,
}

/// POST /v1/admin/organizations/{id}/payments (staff): 201 Payment. With an
/// `Idempotency-Key`, a retry answers the first result and records nothing;
/// a payment with the same reference, amount, currency and day as one
/// recorded (whatever its key) is 409 unless `confirm_duplicate`, and an
/// amount beyond what the invoice owes is 409 unless `credit_remainder`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn record(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    req: HttpRequest,
    body: web::Json<NewPayment>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    let amount = super::amount("amount_minor", body.amount_minor)?;
    let currency = body.currency;
    let method = Method::param("method", Some(&body.method))?.unwrap_or(Method::Other);
    let reference = super::text("reference", &body.reference, REFERENCE_MAX, false)?;
    let note = super::text("note", &body.note, NOTE_MAX, false)?;
    let received_at = super::model::date(&body.received_at)
        .ok_or_else(|| ApiError::bad_request("received_at must be a date YYYY-MM-DD"))?;
    let key = idempotency::key_of(&req)?;
    let scope = format!("payment:{org}");
    let mut tx = state.pool.begin().await?;
    if let Some(k) = &key {
        if let Some(replayed) = idempotency::start(&mut tx, &scope, k, &*body).await? {
            return Ok(replayed);
        }
    }
    let outcome = async {
        let billed = store::lock_org(&mut tx, org)
            .await?
            .ok_or(ApiError::NotFound)?;
        let r = Received {
            invoice_id: body.invoice_id,
            amount_minor: amount,
            currency,
            method,
            reference: &reference,
            received_at,
            note: &note,
            claim_id: None,
            confirm_duplicate: body.confirm_duplicate,
            credit_remainder: body.credit_remainder,
        };
        let id = record_in(&state, &mut tx, &caller, org, &billed, r).await?;
        let p = store::payment(&mut tx, id).await?;
        Ok::<Value, ApiError>(serde_json::to_value(p).map_err(anyhow::Error::from)?)
    }
    .await;
    let resp =
        idempotency::settle_as(tx, key.as_deref(), &scope, StatusCode::CREATED, outcome).await;
    state.outbox.kick();
    resp
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FromWallet {
    #[serde(deserialize_with = "hub_domain::integer::exact")]
    amount_minor: MinorUnits,
}

/// POST /v1/admin/invoices/{invoice_id}/pay-from-wallet (staff): debit the
/// wallet through the ledger (409 below zero) and apply it to the invoice (at
/// most what it still owes: 422 beyond). The invoice as it is now.
#[tracing::instrument(skip_all, fields(invoice_id = %path))]
pub async fn pay_from_wallet(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<InvoiceId>,
    req: HttpRequest,
    body: web::Json<FromWallet>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let amount = super::amount("amount_minor", body.amount_minor)?;
    let key = idempotency::key_of(&req)?;
    let scope = format!("pay_from_wallet:{id}");
    let mut tx = state.pool.begin().await?;
    if let Some(k) = &key {
        if let Some(replayed) = idempotency::start(&mut tx, &scope, k, &*body).await? {
            return Ok(replayed);
        }
    }
    let outcome = async {
        let org = store::invoice_org(&mut tx, id)
            .await?
            .ok_or(ApiError::NotFound)?;
        let billed = store::lock_org(&mut tx, org)
            .await?
            .ok_or(ApiError::NotFound)?;
        let doc = payable(&mut tx, org, id).await?;
        if doc.currency != billed.currency {
            return Err(ApiError::Unprocessable(format!(
                "the invoice is in {} but the wallet is in {}",
                doc.currency, billed.currency
            )));
        }
        let owed = owed(&doc)?;
        if amount > owed {
            return Err(ApiError::Unprocessable(format!(
                "amount_minor is more than the {owed} the invoice still owes"
            )));
        }
        let m = ledger::wallet::move_of(
            &state,
            &caller,
            org,
            amount
                .checked_neg()
                .ok_or_else(|| ApiError::internal(anyhow::anyhow!("-{amount} overflows")))?,
            EntryKind::InvoicePayment,
            format!("invoice {}", doc.number),
        )?;
        let debited = ledger::apply_one::<Wallet>(&mut tx, &m)
            .await?
            .map_err(ApiError::from)?;
        store::insert_settlement(
            &mut tx,
            id,
            org,
            amount,
            debited.transaction_id,
            caller.user_id(),
        )
        .await?;
        store::add_paid(&mut tx, id, amount).await?;
        outbox::audit(
            &mut tx,
            &state.naming,
            &caller,
            AuditAction::InvoicePaidFromWallet,
            org,
            json!({"invoice_id": id, "number": doc.number, "amount_minor": amount,
                   "currency": doc.currency, "transaction_id": debited.transaction_id}),
        )
        .await?;
        let doc = store::invoice(&mut tx, id, None)
            .await?
            .ok_or(ApiError::NotFound)?;
        Ok::<Value, ApiError>(serde_json::to_value(doc).map_err(anyhow::Error::from)?)
    }
    .await;
    let resp = idempotency::settle_as(tx, key.as_deref(), &scope, StatusCode::OK, outcome).await;
    state.outbox.kick();
    resp
}

/// Payments of `owner`, newest first, in cursor pages.
pub async fn page_of(
    state: &AppState,
    owner: Owner,
    q: &page::Query,
    base: &str,
) -> ApiResult<HttpResponse> {
    let (limit, after) = super::page_of(state, q.limit, q.cursor.as_deref())?;
    let rows = store::payments(&state.pool, owner, after, limit + 1).await?;
    Ok(page::respond(
        rows,
        limit,
        |p| (p.created_at, p.id.as_uuid()),
        |c| format!("{base}?limit={limit}&cursor={c}"),
    ))
}

/// GET /v1/organizations/{id}/payments?limit=&cursor= (finance).
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    super::readable(&state, &caller, org).await?;
    page_of(
        &state,
        Owner::Org(org),
        &q,
        &format!("/v1/organizations/{org}/payments"),
    )
    .await
}
