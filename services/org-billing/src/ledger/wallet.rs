//! The wallet and its append-only ledger. Every balance change is a ledger row
//! written in the transaction that changes the balance, carrying the balance
//! after it; corrections are new (negative) rows, never edits.

use super::{EntryKind, Move, WalletBalance};
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use event_contracts::{AuditRecorded, Envelope, Event};
use hub_domain::{MinorUnits, OrgId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use service_kit::{
    assertion::{Caller, StaffCaller},
    page, ApiError, ApiResult,
};

/// Largest single credit or correction, in minor units.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000_000;
pub const NOTE_MAX: usize = 500;

/// GET /v1/organizations/{id}/wallet: `{org_id, currency, balance_minor}`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    crate::billing::authorize_reader(&caller, org_id)?;
    let (currency, balance) = super::store::wallet(&state.pool, org_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok()
        .json(json!({"org_id": org_id, "currency": currency, "balance_minor": balance})))
}

/// Wallet transactions per page: by default and at most (the last 100 when
/// no page is asked for, as before cursors).
pub const PAGE_MAX: i64 = 100;

/// GET /v1/organizations/{id}/wallet/transactions?limit=&cursor=: newest
/// first, `limit` (1 to 100, default 100) at a time; a page with more names
/// the next in `x-next-cursor` and `Link: rel="next"`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn transactions(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    crate::billing::authorize_reader(&caller, org_id)?;
    let limit = page::limit(q.limit, PAGE_MAX, PAGE_MAX)?;
    let before = page::seq::after(q.cursor.as_deref())?;
    let rows = super::store::transactions(&state.pool, org_id, before, limit + 1).await?;
    // No rows: a new wallet, or (for staff) an organization that does not exist.
    if rows.is_empty() {
        crate::orgs::store::require(&mut *state.pool.acquire().await?, org_id).await?;
    }
    Ok(page::seq::respond(
        rows,
        limit,
        |t| t.id,
        |c| format!("/v1/organizations/{org_id}/wallet/transactions?limit={limit}&cursor={c}"),
    ))
}

/// An amount in minor units: a JSON integer, however spelled (`5` or `5.0`).
fn minor_units<'de, D: serde::Deserializer<'de>>(d: D) -> Result<MinorUnits, D::Error> {
    hub_domain::integer::exact(d).map(MinorUnits)
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Credit {
    #[serde(deserialize_with = "minor_units")]
    amount_minor: MinorUnits,
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
    if body.amount_minor.0 == 0 || body.amount_minor.0.unsigned_abs() > MAX_AMOUNT.unsigned_abs() {
        return Err(ApiError::BadRequest(format!(
            "amount_minor must be a non-zero integer of at most {MAX_AMOUNT} in absolute value"
        )));
    }
    if body.note.chars().count() > NOTE_MAX || body.note.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "note must be at most {NOTE_MAX} characters"
        )));
    }
    let m = wallet_move(
        &state,
        &caller.0,
        org_id,
        body.amount_minor,
        body.note.clone(),
    )?;
    let scope = format!("wallet_credit:{org_id}");
    super::keyed::apply(&state, &state.wallets, &req, scope, &body, m, |a| {
        applied(org_id, a)
    })
    .await
}

fn applied(org_id: OrgId, a: WalletBalance) -> Value {
    json!({"org_id": org_id, "currency": a.currency, "balance_minor": a.balance_minor,
           "transaction_id": a.transaction_id})
}

/// The move for a credit (positive: a bank transfer) or a correction
/// (negative), with its audit event.
fn wallet_move(
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
    delta: MinorUnits,
    note: String,
) -> ApiResult<Move> {
    let kind = if delta.is_negative() {
        EntryKind::Correction
    } else {
        EntryKind::BankTransfer
    };
    move_of(state, caller, org_id, delta, kind, note)
}

/// A wallet move of `kind` by `caller`, with its audit event (the writer adds
/// the ledger row's id and the balance after it).
pub fn move_of(
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
    delta: MinorUnits,
    kind: EntryKind,
    note: String,
) -> ApiResult<Move> {
    let event = Envelope::new(service_kit::outbox::audit_event(
        caller,
        event_contracts::AuditAction::WalletCredited,
        org_id,
        json!({"org_id": org_id, "amount_minor": delta, "kind": kind.as_str(), "note": note}),
    ));
    Ok(Move {
        org_id,
        delta: delta.0,
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
