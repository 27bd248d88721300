//! The wallet and its append-only ledger. Every balance change is a ledger row
//! written in the transaction that changes the balance, carrying the balance
//! after it; corrections are new (negative) rows, never edits.

use crate::{
    idempotency,
    ledger::{self, Applied, Move},
    state::AppState,
};
use actix_web::{web, HttpRequest, HttpResponse};
use event_contracts::{AuditRecorded, Envelope, Event};
use hub_domain::{Capability, OrgId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use service_kit::{
    assertion::{Caller, StaffCaller},
    ApiError, ApiResult,
};
use time::OffsetDateTime;

/// Largest single credit or correction, in minor units.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000_000;
pub const NOTE_MAX: usize = 500;

/// Finance reads: owner or finance of the organization, or staff.
fn authorize_finance(caller: &Caller, org_id: OrgId) -> ApiResult<()> {
    if caller.identity.staff {
        return Ok(());
    }
    caller.require(org_id, Capability::FinanceRead).map(|_| ())
}

/// GET /v1/organizations/{id}/wallet: `{org_id, currency, balance_minor}`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    authorize_finance(&caller, org_id)?;
    let row = sqlx::query!(
        "SELECT currency, balance_minor FROM wallets WHERE org_id = $1",
        org_id as OrgId,
    )
    .fetch_optional(&state.pool)
    .await?
    .ok_or(ApiError::NotFound)?;
    let (currency, balance) = (row.currency, row.balance_minor);
    Ok(HttpResponse::Ok()
        .json(json!({"org_id": org_id, "currency": currency, "balance_minor": balance})))
}

#[derive(Serialize)]
struct WalletTransaction {
    id: i64,
    delta_minor: i64,
    balance_after_minor: i64,
    kind: String,
    note: String,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
}

/// GET /v1/organizations/{id}/wallet/transactions: the last 100, newest first.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn transactions(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    authorize_finance(&caller, org_id)?;
    let rows: Vec<WalletTransaction> = sqlx::query_as!(
        WalletTransaction,
        "SELECT id, delta_minor, balance_after AS balance_after_minor, kind, note, created_at \
         FROM wallet_transactions WHERE org_id = $1 ORDER BY id DESC LIMIT 100",
        org_id as OrgId,
    )
    .fetch_all(&state.pool)
    .await?;
    // No rows: a new wallet, or (for staff) an organization that does not exist.
    if rows.is_empty() {
        super::require_org(&mut *state.pool.acquire().await?, org_id).await?;
    }
    Ok(HttpResponse::Ok().json(rows))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Credit {
    amount_minor: i64,
    #[serde(default)]
    note: String,
}

/// POST /v1/organizations/{id}/wallet/credit (staff): record a bank transfer
/// (positive) or a correction (negative). 409 if the balance would go below
/// zero, 400 if it would pass the largest balance. `Idempotency-Key` makes
/// retries return the first result. The staff check comes before the body is
/// read (the extractor order), so a non-staff caller gets 403 whatever it sent.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn credit(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    req: HttpRequest,
    body: web::Json<Credit>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    let body = body.into_inner();
    if body.amount_minor == 0 || body.amount_minor.unsigned_abs() > MAX_AMOUNT.unsigned_abs() {
        return Err(ApiError::BadRequest(format!(
            "amount_minor must be a non-zero integer of at most {MAX_AMOUNT} in absolute value"
        )));
    }
    if body.note.chars().count() > NOTE_MAX || body.note.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "note must be at most {NOTE_MAX} characters"
        )));
    }
    let key = idempotency::key_of(&req)?;
    let m = wallet_move(
        &state,
        &caller.0,
        org_id,
        body.amount_minor,
        body.note.clone(),
    )?;
    let Some(k) = key.as_deref() else {
        // No key: group commit with whatever else waits for this wallet.
        return state
            .wallets
            .apply(m)
            .await
            .map(|a| HttpResponse::Ok().json(applied(org_id, a)));
    };
    let scope = format!("wallet_credit:{org_id}");
    let mut tx = state.pool.begin().await?;
    if let Some(replayed) = idempotency::start(&mut tx, &scope, k, &body).await? {
        return Ok(replayed);
    }
    let outcome = ledger::apply(&mut tx, ledger::Book::Wallet, std::slice::from_ref(&m))
        .await?
        .pop()
        // One row per move (or `apply` failed): never empty.
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("the wallet book answered no row")))?
        .map_err(ApiError::from)
        .map(|a| applied(org_id, a));
    let resp = idempotency::settle(tx, Some(k), &scope, outcome).await;
    state.outbox.kick();
    resp
}

fn applied(org_id: OrgId, a: Applied) -> Value {
    json!({"org_id": org_id, "currency": a.currency, "balance_minor": a.balance_minor,
           "transaction_id": a.transaction_id})
}

/// The move for a credit (positive: a bank transfer) or a correction
/// (negative), with its audit event.
fn wallet_move(
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
    delta: i64,
    note: String,
) -> ApiResult<Move> {
    let kind = if delta > 0 {
        "bank_transfer"
    } else {
        "correction"
    };
    // The writer adds the ledger row's id and the balance after it.
    let event = Envelope::new(service_kit::outbox::audit_event(
        caller,
        event_contracts::AuditAction::WalletCredited,
        org_id,
        json!({"org_id": org_id, "amount_minor": delta, "kind": kind, "note": note}),
    ));
    Ok(Move {
        org_id,
        delta,
        kind,
        note,
        actor_user_id: caller.user_id(),
        member: None,
        event_id: event.id,
        subject: state.naming.subject(AuditRecorded::SUBJECT),
        payload: serde_json::to_string(&event).map_err(anyhow::Error::from)?,
        traceparent: service_kit::telemetry::current_traceparent(),
        deadline: state.move_deadline(caller),
    })
}
