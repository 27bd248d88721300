//! `Idempotency-Key`: the first result of an operation (success or a business
//! refusal) is stored with the key in the operation's own transaction and
//! replayed on retries; the same key with a different request is refused (422).
//! Concurrent retries wait on the key's row lock, then replay.
//!
//! A service that uses it has the table `idempotency_keys (scope text, key text,
//! request_hash bytea, status int, body jsonb, created_at timestamptz, primary
//! key (scope, key))` in its schema (org-billing's init migration has it) and
//! runs [`sweep`] periodically. `scope` names the operation and its resource
//! (`wallet_credit:<org>`), so one key may serve different operations.

use crate::{ApiError, ApiResult};
use actix_web::{http::StatusCode, HttpRequest, HttpResponse};
use ring::digest;
use serde_json::Value;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

pub const HEADER: &str = "idempotency-key";

/// The header's value, if any: 1 to 255 visible ASCII characters.
pub fn key_of(req: &HttpRequest) -> ApiResult<Option<String>> {
    let Some(v) = req.headers().get(HEADER) else {
        return Ok(None);
    };
    let s = v
        .to_str()
        .ok()
        .filter(|s| !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            ApiError::bad_request("Idempotency-Key must be 1 to 255 visible ASCII characters")
        })?;
    Ok(Some(s.to_owned()))
}

fn request_hash(body: &Value) -> Vec<u8> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    digest::digest(&digest::SHA256, &bytes).as_ref().to_vec()
}

enum Begin {
    Fresh,
    Replay(u16, Value),
    Mismatch,
}

async fn begin(
    conn: &mut PgConnection,
    scope: &str,
    key: &str,
    hash: &[u8],
) -> sqlx::Result<Begin> {
    let inserted = sqlx::query!(
        "INSERT INTO idempotency_keys (scope, key, request_hash) VALUES ($1, $2, $3) \
         ON CONFLICT (scope, key) DO NOTHING",
        scope,
        key,
        hash,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(Begin::Fresh);
    }
    let stored = sqlx::query!(
        "SELECT request_hash, status, body FROM idempotency_keys WHERE scope = $1 AND key = $2",
        scope,
        key,
    )
    .fetch_one(&mut *conn)
    .await?;
    let (stored_hash, status, body) = (stored.request_hash, stored.status, stored.body);
    if stored_hash != hash {
        return Ok(Begin::Mismatch);
    }
    Ok(match (status, body) {
        (Some(s), Some(b)) => Begin::Replay(s as u16, b),
        // Cannot happen: the row is written with its result in one transaction.
        _ => Begin::Mismatch,
    })
}

fn replay(status: u16, body: Value) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)).json(body)
}

/// Finish an operation: commit with its result stored under the key (business
/// refusals too), or roll back for anything else.
pub async fn settle(
    tx: Transaction<'_, Postgres>,
    key: Option<&str>,
    scope: &str,
    outcome: Result<Value, ApiError>,
) -> ApiResult<HttpResponse> {
    settle_as(tx, key, scope, StatusCode::OK, outcome).await
}

/// [`settle`] for an operation whose success answers `success` (201 for a
/// creation); a replay answers the same.
pub async fn settle_as(
    mut tx: Transaction<'_, Postgres>,
    key: Option<&str>,
    scope: &str,
    success: StatusCode,
    outcome: Result<Value, ApiError>,
) -> ApiResult<HttpResponse> {
    let ok = success.as_u16();
    let stored = match &outcome {
        Ok(v) => Some((i32::from(ok), v.clone())),
        Err(ApiError::Conflict(m)) => Some((409, serde_json::json!({ "error": m }))),
        Err(_) => None,
    };
    match (key, stored) {
        (Some(k), Some((status, body))) => {
            sqlx::query!(
                "UPDATE idempotency_keys SET status = $3, body = $4 WHERE scope = $1 AND key = $2",
                scope,
                k,
                status,
                &body,
            )
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
        }
        (None, Some((status, _))) if status == i32::from(ok) => tx.commit().await?,
        _ => tx.rollback().await?,
    }
    outcome.map(|v| HttpResponse::build(success).json(v))
}

/// Start an operation under `key`: `None` to go on, or the response to answer
/// (a replay of the first result, or 422 for the key reused with another request).
pub async fn start(
    conn: &mut PgConnection,
    scope: &str,
    key: &str,
    body: &impl serde::Serialize,
) -> ApiResult<Option<HttpResponse>> {
    let hash = request_hash(&serde_json::to_value(body).unwrap_or_default());
    match begin(conn, scope, key, &hash).await? {
        Begin::Fresh => Ok(None),
        Begin::Replay(status, stored) => Ok(Some(replay(status, stored))),
        Begin::Mismatch => Err(mismatch()),
    }
}

fn mismatch() -> ApiError {
    ApiError::Unprocessable("Idempotency-Key was already used with a different request".into())
}

/// Delete keys older than `keep_secs`: a retry after that is a new request.
pub async fn sweep(pool: &PgPool, keep_secs: i64) -> sqlx::Result<u64> {
    let r = sqlx::query!(
        "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)",
        keep_secs as f64,
    )
    .execute(pool)
    .await?;
    Ok(r.rows_affected())
}
