//! A move as a request applies it: through the book's group commit, or, with
//! an `Idempotency-Key`, in a transaction of its own with the key's record
//! (a retry replays the first answer; the same key with another request is 422).

use super::{Book, Move, Writer};
use crate::state::AppState;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::Value;
use service_kit::{idempotency, ApiError, ApiResult};

/// Apply `m` to book `B` and answer `answer(balance)`; `scope` names the
/// operation and its resource for the key, `body` is what the key binds.
pub async fn apply<B: Book>(
    state: &AppState,
    writer: &Writer<B>,
    req: &HttpRequest,
    scope: String,
    body: &impl serde::Serialize,
    m: Move,
    answer: impl Fn(B::Applied) -> Value,
) -> ApiResult<HttpResponse> {
    let Some(k) = idempotency::key_of(req)? else {
        // No key: group commit with whatever else waits for this book's shard.
        return writer
            .apply(m)
            .await
            .map(|a| HttpResponse::Ok().json(answer(a)));
    };
    let mut tx = state.pool.begin().await?;
    if let Some(replayed) = idempotency::start(&mut tx, &scope, &k, body).await? {
        return Ok(replayed);
    }
    let outcome = super::apply_one::<B>(&mut tx, &m)
        .await?
        .map_err(ApiError::from)
        .map(answer);
    let resp = idempotency::settle(tx, Some(&k), &scope, outcome).await;
    state.outbox.kick();
    resp
}
