//! Payment claims: a finance member says they made a transfer; staff approve
//! it (the payment is recorded in the same transaction as the decision, so two
//! approvals make one payment) or reject it with notes the customer sees.

use super::{
    model::{ClaimStatus, InvoiceStatus, Kind, Method, PaymentClaim},
    payments::{self, Received, NOTE_MAX, REFERENCE_MAX},
    store,
};
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{Capability, ClaimId, Currency, InvoiceId, MinorUnits, OrgId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, page, ApiError, ApiResult,
};
use sqlx::PgConnection;
use time::OffsetDateTime;

pub const REVIEW_NOTES_MAX: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewClaim {
    #[serde(deserialize_with = "hub_domain::integer::exact")]
    amount_minor: MinorUnits,
    currency: Currency,
    reference: String,
    #[serde(default)]
    note: String,
    invoice_id: Option<InvoiceId>,
}

/// POST /v1/organizations/{id}/payment-claims (owner or finance): 201
/// PaymentClaim. The invoice, when named, must be this organization's and in
/// the claim's currency (422), and one that can still be paid: a proforma, a
/// void or a paid invoice is 409 naming its state. At most
/// `billing.max_pending_claims` pending.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<NewClaim>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    caller.require(org, Capability::FinanceRead)?;
    let amount = super::amount("amount_minor", body.amount_minor)?;
    let currency = body.currency;
    let reference = super::text("reference", &body.reference, REFERENCE_MAX, true)?;
    let note = super::text("note", &body.note, NOTE_MAX, false)?;
    let mut tx = state.pool.begin().await?;
    let billed = store::lock_org(&mut tx, org)
        .await?
        .ok_or(ApiError::NotFound)?;
    if let Some(id) = body.invoice_id {
        let doc = store::invoice(&mut tx, id, Some(org))
            .await?
            .ok_or_else(|| {
                ApiError::Unprocessable("invoice_id is not an invoice of this organization".into())
            })?;
        if doc.kind == Kind::Proforma {
            return Err(ApiError::conflict(
                "the document is a proforma: claim a payment of its invoice",
            ));
        }
        if matches!(doc.status, InvoiceStatus::Void | InvoiceStatus::Paid) {
            return Err(ApiError::Conflict(format!(
                "the invoice is {}: it takes no payment",
                doc.status
            )));
        }
        if doc.currency != currency {
            return Err(ApiError::Unprocessable(format!(
                "the claim is in {} but the invoice is in {}",
                currency.as_str(),
                doc.currency
            )));
        }
    } else if billed.currency != currency {
        return Err(ApiError::Unprocessable(format!(
            "a claim without an invoice goes to the wallet, which is in {}",
            billed.currency
        )));
    }
    let max = state.billing.max_pending_claims;
    if store::pending_claims_of(&mut tx, org).await? >= max {
        return Err(ApiError::Conflict(format!(
            "the organization already has {max} pending payment claims"
        )));
    }
    let claim = store::insert_claim(
        &mut tx,
        &store::NewClaim {
            org_id: org,
            invoice_id: body.invoice_id,
            amount_minor: amount,
            currency,
            reference: &reference,
            note: &note,
            created_by: caller.user_id(),
        },
    )
    .await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ClaimSubmitted,
        org,
        json!({"claim_id": claim.id, "invoice_id": claim.invoice_id,
               "amount_minor": amount, "currency": claim.currency}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(claim))
}

/// GET /v1/organizations/{id}/payment-claims (finance): newest first.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    super::readable(&state, &caller, org).await?;
    let (limit, after) = super::page_of(&state, q.limit, q.cursor.as_deref())?;
    let rows = store::claims_of(&state.pool, org, after, limit + 1).await?;
    Ok(page::respond(
        rows,
        limit,
        |c| (c.created_at, c.id.as_uuid()),
        |c| format!("/v1/organizations/{org}/payment-claims?limit={limit}&cursor={c}"),
    ))
}

#[derive(Deserialize)]
pub struct QueueQuery {
    limit: Option<i64>,
}

/// GET /v1/admin/payment-claims (staff): pending claims, oldest first, with
/// the organization's name.
#[tracing::instrument(skip_all)]
pub async fn queue(
    _caller: StaffCaller,
    state: web::Data<AppState>,
    q: web::Query<QueueQuery>,
) -> ApiResult<HttpResponse> {
    let (limit, _) = super::page_of(&state, q.limit, None)?;
    Ok(HttpResponse::Ok().json(store::claim_queue(&state.pool, limit).await?))
}

/// Lock claim `id` (its organization first): 404 when there is none, 409 when
/// it was already decided.
async fn pending(tx: &mut PgConnection, id: ClaimId) -> ApiResult<(PaymentClaim, store::Billed)> {
    let org = store::claim_org(tx, id).await?.ok_or(ApiError::NotFound)?;
    let billed = store::lock_org(tx, org).await?.ok_or(ApiError::NotFound)?;
    let claim = store::lock_claim(tx, id).await?.ok_or(ApiError::NotFound)?;
    if claim.status != ClaimStatus::Pending {
        return Err(ApiError::Conflict(format!(
            "the claim was already {}",
            claim.status
        )));
    }
    Ok((claim, billed))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The day the transfer arrived (`YYYY-MM-DD`); default today (UTC).
    received_at: Option<String>,
    #[serde(default)]
    review_notes: String,
    /// Staff checked that this is another transfer than the approved claim
    /// (or payment) with the same reference and amount.
    #[serde(default)]
    confirm_duplicate: bool,
    /// Credit what the invoice does not take (all of it, once the invoice is
    /// paid) to the wallet; without it that is 409.
    #[serde(default)]
    credit_remainder: bool,
}

/// POST /v1/admin/payment-claims/{claim_id}/approve (staff): records the
/// payment (bank transfer, the claim's reference) and the decision in one
/// transaction; 409 on a second decision, 409 naming the other claim when an
/// approved claim has the same reference, amount and currency (unless
/// `confirm_duplicate`), 409 when the invoice owes less than the claim
/// (unless `credit_remainder`). The claim as it is now.
#[tracing::instrument(skip_all, fields(claim_id = %path))]
pub async fn approve(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<ClaimId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let body: Approval = super::documents::optional_body(&body)?;
    let received_at = match &body.received_at {
        Some(d) => super::model::date(d)
            .ok_or_else(|| ApiError::bad_request("received_at must be a date YYYY-MM-DD"))?,
        None => OffsetDateTime::now_utc().date(),
    };
    let notes = super::text("review_notes", &body.review_notes, REVIEW_NOTES_MAX, false)?;
    let mut tx = state.pool.begin().await?;
    let (claim, billed) = pending(&mut tx, id).await?;
    // Under the organization's lock, so a concurrent approval of a twin
    // waits and then finds this one; `payment_claims_one_transfer` backs it.
    // A claim has no day of its own: any approved claim, or any payment on
    // whatever day, with its reference, amount and currency may be it.
    let twin = store::duplicate_claim(&mut tx, &claim).await?;
    if let Some(other) = twin.filter(|_| !body.confirm_duplicate) {
        return Err(ApiError::Conflict(format!(
            "claim {other} with the same reference, amount and currency was approved \
             (duplicate_of {other}): set confirm_duplicate if this is another transfer"
        )));
    }
    let paid = store::duplicate_payment(
        &mut tx,
        claim.org_id,
        &claim.reference,
        claim.amount_minor,
        claim.currency,
        None,
    )
    .await?;
    if let Some(other) = paid.filter(|_| !body.confirm_duplicate) {
        return Err(ApiError::Conflict(format!(
            "payment {other} with the same reference, amount and currency was recorded \
             (duplicate_of {other}): set confirm_duplicate if this is another transfer"
        )));
    }
    let r = Received {
        invoice_id: claim.invoice_id,
        amount_minor: claim.amount_minor,
        currency: claim.currency,
        method: Method::BankTransfer,
        reference: &claim.reference,
        received_at,
        note: &claim.note,
        claim_id: Some(id),
        confirm_duplicate: body.confirm_duplicate,
        credit_remainder: body.credit_remainder,
    };
    let payment = payments::record_in(&state, &mut tx, &caller, claim.org_id, &billed, r).await?;
    let claim = store::decide_claim(
        &mut tx,
        id,
        ClaimStatus::Approved,
        &notes,
        Some(payment),
        twin.is_some(),
        caller.user_id(),
    )
    .await
    .map_err(payments::once)?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ClaimApproved,
        claim.org_id,
        json!({"claim_id": id, "payment_id": payment, "amount_minor": claim.amount_minor,
               "currency": claim.currency, "duplicate_of": twin}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(claim))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    review_notes: String,
}

/// POST /v1/admin/payment-claims/{claim_id}/reject (staff): `review_notes`
/// (required) tell the customer why; 409 on a second decision.
#[tracing::instrument(skip_all, fields(claim_id = %path))]
pub async fn reject(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<ClaimId>,
    body: web::Json<Rejection>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let notes = super::text("review_notes", &body.review_notes, REVIEW_NOTES_MAX, true)?;
    let mut tx = state.pool.begin().await?;
    pending(&mut tx, id).await?;
    let claim = store::decide_claim(
        &mut tx,
        id,
        ClaimStatus::Rejected,
        &notes,
        None,
        false,
        caller.user_id(),
    )
    .await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::ClaimRejected,
        claim.org_id,
        json!({"claim_id": id, "amount_minor": claim.amount_minor, "currency": claim.currency}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(claim))
}
