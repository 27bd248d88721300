//! AI-token balances: an append-only token ledger, staff grants, and the spend
//! operation for the agent (internal), which never goes below zero. Grants and
//! spends go through the same group commit as wallet moves ([`super`], book
//! [`Tokens`]). Tokens never convert to money: nothing here touches the
//! wallet. Each member's AI settings and usage are in [`crate::members_ai`].

use super::{EntryKind, Move, TokenBalance};
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use event_contracts::{AuditRecorded, Envelope, Event};
use hub_domain::{Capability, OrgId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use service_kit::{
    assertion::{Caller, StaffCaller},
    ApiError, ApiResult,
};

pub const MAX_AMOUNT: i64 = 1_000_000_000_000;
pub const REASON_MAX: usize = 500;

/// GET /v1/organizations/{id}/tokens: any member (or staff): `{org_id, balance}`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    // Staff who are not members read as visitors, audited (the kit's require).
    caller.require(org_id, Capability::Read)?;
    let balance = super::store::token_balance(&state.pool, org_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(json!({"org_id": org_id, "balance": balance})))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Amount {
    #[serde(deserialize_with = "hub_domain::integer::exact")]
    amount: i64,
    #[serde(default)]
    reason: String,
}

fn validate(body: &Amount) -> ApiResult<()> {
    if body.amount <= 0 || body.amount > MAX_AMOUNT {
        return Err(ApiError::BadRequest(format!(
            "amount must be a positive integer of at most {MAX_AMOUNT}"
        )));
    }
    if body.reason.chars().count() > REASON_MAX || body.reason.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "reason must be at most {REASON_MAX} characters"
        )));
    }
    Ok(())
}

/// A token move (grant: positive, no member; spend: negative, attributed to
/// `member`) with its audit event; the writer adds the ledger row's id and
/// the balance after it to the event.
fn token_move(
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
    delta: i64,
    reason: &str,
    member: Option<UserId>,
) -> ApiResult<Move> {
    let (kind, action) = if member.is_some() {
        (EntryKind::Spend, event_contracts::AuditAction::TokensSpent)
    } else {
        (
            EntryKind::Grant,
            event_contracts::AuditAction::TokensGranted,
        )
    };
    let event = Envelope::new(service_kit::outbox::audit_event(
        caller,
        action,
        org_id,
        json!({"org_id": org_id, "amount": delta.unsigned_abs(), "reason": reason}),
    ));
    Ok(Move {
        org_id,
        delta,
        kind,
        note: reason.to_owned(),
        actor_user_id: caller.user_id(),
        member,
        event_id: event.id,
        subject: state.naming.subject(AuditRecorded::SUBJECT),
        payload: serde_json::to_string(&event).map_err(anyhow::Error::from)?,
        traceparent: service_kit::telemetry::current_traceparent(),
        deadline: state.move_deadline(caller),
    })
}

fn balance(org_id: OrgId, a: TokenBalance) -> Value {
    json!({"org_id": org_id, "balance": a.balance})
}

/// POST /v1/organizations/{id}/tokens/grant (staff): `{org_id, balance}`.
/// The staff check comes before the body (403 whatever a non-staff caller
/// sent). Without an Idempotency-Key the grant joins the group commit; with
/// one it runs in its own transaction with the key's record.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn grant(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    req: HttpRequest,
    body: web::Json<Amount>,
) -> ApiResult<HttpResponse> {
    let caller = caller.0;
    let org_id = path.into_inner();
    let body = body.into_inner();
    validate(&body)?;
    let m = token_move(&state, &caller, org_id, body.amount, &body.reason, None)?;
    let scope = format!("token_grant:{org_id}");
    super::keyed::apply(&state, &state.tokens, &req, scope, &body, m, |a| {
        balance(org_id, a)
    })
    .await
}

/// POST /internal/v1/organizations/{id}/tokens/spend: the agent spends tokens
/// on behalf of a member (the asserted caller), through the group commit.
/// 402 when the organization's balance or the member's personal limit cannot
/// hold it, 403 when AI is disabled for the member, 404 for a non-member.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn spend(
    state: web::Data<AppState>,
    _peer: service_kit::assertion::Peer<service_kit::assertion::from::Agent>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<Amount>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require(org_id, Capability::Read)?;
    validate(&body)?;
    let m = token_move(
        &state,
        &caller,
        org_id,
        -body.amount,
        &body.reason,
        Some(caller.user_id()),
    )?;
    let a = state.tokens.apply(m).await?;
    Ok(HttpResponse::Ok().json(balance(org_id, a)))
}
