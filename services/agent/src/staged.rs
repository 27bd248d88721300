//! Staged actions (stored with their exchange, see [`crate::journal`]):
//! create_org, credit_wallet, grant_tokens and revoke_session
//! are prepared by `POST /v1/agent` and run only when their owner confirms.
//!
//! - A staged action belongs to its caller (404 to anyone else) and expires
//!   `agent.confirm_ttl_secs` (15 minutes) after it was prepared.
//! - Taking it is one conditional UPDATE (staged, the caller's, not expired at
//!   this moment) to `executing`: confirming twice, concurrently or not, or
//!   confirming a rejected or expired action, is a 409, and it runs at most once.
//! - It runs with the caller's authority at the moment of confirmation (their
//!   assertion now, not when it was staged), through the owning service's
//!   public route: a caller the route refuses gets that route's answer (a
//!   non-staff credit_wallet: its 403). It runs exactly the stored arguments.
//! - credit_wallet and grant_tokens carry `Idempotency-Key: agent-<id>`, so even
//!   a crash between the call and the bookkeeping cannot credit twice.

use crate::{audit, state::AppState, tools};
use actix_web::{http::StatusCode, HttpResponse};
use reqwest::Method;
use serde_json::{json, Value};
use service_kit::{assertion::Caller, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct Taken {
    kind: String,
    args: Value,
    summary: String,
}

/// Why a staged action cannot be taken (after the conditional update missed).
async fn refusal(state: &AppState, caller: &Caller, id: Uuid) -> ApiError {
    let row: Result<Option<(String, OffsetDateTime)>, _> = sqlx::query_as(
        "SELECT status, expires_at FROM staged_actions WHERE id = $1 AND user_id = $2",
    )
    .bind(id)
    .bind(caller.user_id())
    .fetch_optional(&state.pool)
    .await;
    match row {
        Err(e) => e.into(),
        Ok(None) => ApiError::NotFound,
        Ok(Some((status, expires_at))) => ApiError::conflict(match status.as_str() {
            "staged" if expires_at <= state.clock.now() => "this action expired; ask again",
            "cancelled" => "this action was rejected",
            _ => "this action was already confirmed",
        }),
    }
}

/// Take the action if it is the caller's, staged and unexpired now.
async fn take(state: &AppState, caller: &Caller, id: Uuid, to: &str) -> ApiResult<Taken> {
    let now = state.clock.now();
    let taken: Option<Taken> = sqlx::query_as(
        "UPDATE staged_actions SET status = $3, decided_at = $4 \
         WHERE id = $1 AND user_id = $2 AND status = 'staged' AND expires_at > $4 \
         RETURNING kind, args, summary",
    )
    .bind(id)
    .bind(caller.user_id())
    .bind(to)
    .bind(now)
    .fetch_optional(&state.pool)
    .await?;
    match taken {
        Some(t) => Ok(t),
        None => Err(refusal(state, caller, id).await),
    }
}

/// The public call that carries out a staged action.
fn request(
    kind: &str,
    args: &Value,
    id: Uuid,
) -> ApiResult<(Method, String, Option<Value>, Option<String>)> {
    let s = |k: &str| args[k].as_str().unwrap_or_default().to_owned();
    let key = Some(format!("agent-{id}"));
    Ok(match kind {
        "create_org" => (
            Method::POST,
            "/v1/organizations".into(),
            Some(
                json!({"name": s("name"), "legal_type": s("legal_type"), "country": s("country")}),
            ),
            None,
        ),
        "credit_wallet" => (
            Method::POST,
            format!("/v1/organizations/{}/wallet/credit", s("org_id")),
            Some(
                json!({"amount_minor": args["amount_minor"], "note": "credited through the assistant"}),
            ),
            key,
        ),
        "grant_tokens" => (
            Method::POST,
            format!("/v1/organizations/{}/tokens/grant", s("org_id")),
            Some(json!({"amount": args["amount"], "reason": "granted through the assistant"})),
            key,
        ),
        "revoke_session" => (
            Method::DELETE,
            format!("/v1/auth/sessions/{}", s("session_id")),
            None,
            None,
        ),
        other => {
            return Err(ApiError::Internal(anyhow::anyhow!(
                "unknown staged action kind {other:?}"
            )))
        }
    })
}

/// POST /v1/agent/confirm: run the action once. 200 with the route's answer
/// when it succeeded; the route's own status and error when it refused.
pub async fn confirm(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<HttpResponse> {
    let t = take(state, caller, id, "executing").await?;
    let (method, path, body, key) = request(&t.kind, &t.args, id)?;
    let peer = match t.kind.as_str() {
        "revoke_session" => &state.peers.identity,
        _ => &state.peers.org_billing,
    };
    let outcome = tools::call(peer, caller, method, &path, body.as_ref(), key.as_deref()).await;
    let (status, result) = match &outcome {
        Ok(r) => (
            if r.ok() { "executed" } else { "failed" },
            json!({"status": r.status, "body": r.body}),
        ),
        Err(_) => (
            "failed",
            json!({"status": 503, "body": {"error": "unreachable"}}),
        ),
    };
    let mut tx = state.pool.begin().await?;
    sqlx::query("UPDATE staged_actions SET status = $2, result = $3 WHERE id = $1")
        .bind(id)
        .bind(status)
        .bind(&result)
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        state,
        caller,
        "agent.action_confirmed",
        json!({"confirmation_id": id, "kind": t.kind, "outcome": status}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    let r = outcome?;
    if !r.ok() {
        let code = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY);
        return Ok(HttpResponse::build(code).json(r.body));
    }
    Ok(HttpResponse::Ok().json(json!({
        "status": "executed", "confirmation_id": id, "kind": t.kind,
        "action_summary": t.summary, "result": r.body,
    })))
}

/// POST /v1/agent/reject: cancel the action.
pub async fn reject(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<HttpResponse> {
    let t = take(state, caller, id, "cancelled").await?;
    let mut tx = state.pool.begin().await?;
    audit::record(
        &mut tx,
        state,
        caller,
        "agent.action_rejected",
        json!({"confirmation_id": id, "kind": t.kind}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(json!({
        "status": "cancelled", "confirmation_id": id, "kind": t.kind, "action_summary": t.summary,
    })))
}
