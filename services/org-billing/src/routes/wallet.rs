//! The wallet and its append-only ledger. Every balance change is a ledger row
//! written in the transaction that changes the balance, carrying the balance
//! after it; corrections are new (negative) rows, never edits.

use crate::{idempotency, state::AppState};
use actix_web::{web, HttpRequest, HttpResponse};
use event_contracts::{AuditRecorded, Envelope, Event};
use hub_domain::Capability;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use service_kit::{assertion::Caller, ApiError, ApiResult};
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

/// Largest single credit or correction, in minor units.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000_000;
pub const NOTE_MAX: usize = 500;

/// Finance reads: owner or finance of the organization, or staff.
fn authorize_finance(caller: &Caller, org_id: Uuid) -> ApiResult<()> {
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
    path: web::Path<Uuid>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    authorize_finance(&caller, org_id)?;
    let row: Option<(String, i64)> =
        sqlx::query_as("SELECT currency, balance_minor FROM wallets WHERE org_id = $1")
            .bind(org_id)
            .fetch_optional(&state.pool)
            .await?;
    let (currency, balance) = row.ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok()
        .json(json!({"org_id": org_id, "currency": currency, "balance_minor": balance})))
}

#[derive(Serialize, sqlx::FromRow)]
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
    path: web::Path<Uuid>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    authorize_finance(&caller, org_id)?;
    super::require_org(&mut *state.pool.acquire().await?, org_id).await?;
    let rows: Vec<WalletTransaction> = sqlx::query_as(
        "SELECT id, delta_minor, balance_after AS balance_after_minor, kind, note, created_at \
         FROM wallet_transactions WHERE org_id = $1 ORDER BY id DESC LIMIT 100",
    )
    .bind(org_id)
    .fetch_all(&state.pool)
    .await?;
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
/// zero. `Idempotency-Key` makes retries return the first result.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn credit(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<Uuid>,
    req: HttpRequest,
    body: web::Json<Credit>,
) -> ApiResult<HttpResponse> {
    caller.require_staff()?;
    let org_id = path.into_inner();
    let body = body.into_inner();
    if body.amount_minor == 0 || body.amount_minor.abs() > MAX_AMOUNT {
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
    let scope = format!("wallet_credit:{org_id}");
    let Some(k) = key.as_deref() else {
        // No key: the single statement commits by itself.
        let mut conn = state.pool.acquire().await?;
        let outcome = apply_credit(&state, &mut conn, &caller, org_id, &body).await;
        state.outbox.kick();
        return outcome.map(|v| HttpResponse::Ok().json(v));
    };
    let mut tx = state.pool.begin().await?;
    if let Some(replayed) = idempotency::start(&mut tx, &scope, k, &body).await? {
        return Ok(replayed);
    }
    let outcome = apply_credit(&state, &mut tx, &caller, org_id, &body).await;
    let resp = idempotency::settle(tx, Some(k), &scope, outcome).await;
    state.outbox.kick();
    resp
}

/// One statement moves the balance (row lock, numeric bound check so the check
/// itself cannot overflow), appends the ledger row with the balance after it, and
/// writes the audit event to the outbox. Run outside an explicit transaction it
/// commits by itself, so the hot row is locked only for that one statement and
/// its commit, with no client round trip in between.
async fn apply_credit(
    state: &AppState,
    conn: &mut PgConnection,
    caller: &Caller,
    org_id: Uuid,
    body: &Credit,
) -> Result<Value, ApiError> {
    let kind = if body.amount_minor > 0 {
        "bank_transfer"
    } else {
        "correction"
    };
    let event = Envelope::new(AuditRecorded {
        actor_user_id: Some(caller.user_id()),
        action: "wallet.credited".into(),
        subject: format!("org:{org_id}"),
        detail: json!({"org_id": org_id, "amount_minor": body.amount_minor, "kind": kind, "note": body.note}),
        ip: caller.ip.clone(),
    });
    let payload = serde_json::to_string(&event).map_err(anyhow::Error::from)?;
    let moved: Option<(i64, String, i64)> = sqlx::query_as(
        "WITH moved AS ( \
             UPDATE wallets SET balance_minor = balance_minor + $2, updated_at = now() \
             WHERE org_id = $1 AND balance_minor::numeric + $2 BETWEEN 0 AND 9223372036854775807 \
             RETURNING org_id, balance_minor, currency), \
         entry AS ( \
             INSERT INTO wallet_transactions (org_id, delta_minor, balance_after, kind, note, actor_user_id) \
             SELECT org_id, $2, balance_minor, $3, $4, $5 FROM moved RETURNING id), \
         event AS ( \
             INSERT INTO outbox (id, subject, payload, traceparent) SELECT $6, $7, $8, $9 FROM moved) \
         SELECT m.balance_minor, m.currency, e.id FROM moved m CROSS JOIN entry e",
    )
    .bind(org_id)
    .bind(body.amount_minor)
    .bind(kind)
    .bind(&body.note)
    .bind(caller.user_id())
    .bind(event.id)
    .bind(state.naming.subject(AuditRecorded::SUBJECT))
    .bind(payload)
    .bind(service_kit::telemetry::current_traceparent())
    .fetch_optional(&mut *conn)
    .await?;
    let Some((balance, currency, tx_id)) = moved else {
        return Err(super::refused_move(conn, org_id, "the balance would go below zero").await);
    };
    Ok(
        json!({"org_id": org_id, "currency": currency, "balance_minor": balance, "transaction_id": tx_id}),
    )
}
