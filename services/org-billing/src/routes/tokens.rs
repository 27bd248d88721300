//! AI-token balances: an append-only token ledger, staff grants, and the spend
//! operation for the agent (internal), which never goes below zero. Tokens
//! never convert to money: nothing here touches the wallet.

use crate::{idempotency, state::AppState};
use actix_web::{web, HttpRequest, HttpResponse};
use hub_domain::{Capability, OrgId};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use service_kit::{
    assertion::{Caller, StaffCaller},
    ApiError, ApiResult,
};
use sqlx::PgConnection;

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
    if !caller.identity.staff {
        caller.require(org_id, Capability::Read)?;
    }
    let balance: Option<i64> =
        sqlx::query_scalar("SELECT balance FROM token_balances WHERE org_id = $1")
            .bind(org_id)
            .fetch_optional(&state.pool)
            .await?;
    let balance = balance.ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(json!({"org_id": org_id, "balance": balance})))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Amount {
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

/// Move the balance by `delta` (never below zero) and append the ledger row.
async fn apply(
    conn: &mut PgConnection,
    caller: &Caller,
    org_id: OrgId,
    delta: i64,
    kind: &str,
    reason: &str,
) -> Result<(i64, i64), ApiError> {
    let moved: Option<i64> = sqlx::query_scalar(
        "UPDATE token_balances SET balance = balance + $2, updated_at = now() \
         WHERE org_id = $1 AND balance::numeric + $2 BETWEEN 0 AND 9223372036854775807 \
         RETURNING balance",
    )
    .bind(org_id)
    .bind(delta)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(balance) = moved else {
        return Err(super::refused_move(conn, org_id, "not enough AI tokens").await);
    };
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO token_transactions (org_id, delta, balance_after, kind, reason, actor_user_id) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(org_id)
    .bind(delta)
    .bind(balance)
    .bind(kind)
    .bind(reason)
    .bind(caller.user_id())
    .fetch_one(&mut *conn)
    .await?;
    Ok((balance, id))
}

/// POST /v1/organizations/{id}/tokens/grant (staff): `{org_id, balance}`.
/// The staff check comes before the body (403 whatever a non-staff caller sent).
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
    let key = idempotency::key_of(&req)?;
    let scope = format!("token_grant:{org_id}");
    let mut tx = state.pool.begin().await?;
    if let Some(k) = &key {
        if let Some(replayed) = idempotency::start(&mut tx, &scope, k, &body).await? {
            return Ok(replayed);
        }
    }
    let outcome: Result<Value, ApiError> = async {
        let (balance, id) =
            apply(&mut tx, &caller, org_id, body.amount, "grant", &body.reason).await?;
        service_kit::outbox::audit(
            &mut tx,
            &state.naming,
            &caller,
            "tokens.granted",
            org_id,
            json!({"org_id": org_id, "amount": body.amount, "balance": balance,
                       "reason": body.reason, "transaction_id": id}),
        )
        .await?;
        Ok(json!({"org_id": org_id, "balance": balance}))
    }
    .await;
    let resp = idempotency::settle(tx, key.as_deref(), &scope, outcome).await;
    state.outbox.kick();
    resp
}

/// POST /internal/v1/organizations/{id}/tokens/spend: the agent spends tokens on
/// behalf of a member (the asserted caller). 409 when the balance is short.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn spend(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<Amount>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require(org_id, Capability::Read)?;
    validate(&body)?;
    let mut tx = state.pool.begin().await?;
    let (balance, _) = apply(
        &mut tx,
        &caller,
        org_id,
        -body.amount,
        "spend",
        &body.reason,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({"org_id": org_id, "balance": balance})))
}
