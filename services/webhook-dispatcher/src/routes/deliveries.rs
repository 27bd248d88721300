//! The delivery log and manual redelivery.

use super::endpoints::authorized;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, DeliveryId, EndpointId};
use serde::Serialize;
use service_kit::{assertion::Caller, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Serialize)]
pub struct Delivery {
    id: Uuid,
    endpoint_id: Uuid,
    event: String,
    event_id: Uuid,
    /// 0 for the first attempt series; each manual retry starts the next.
    series: i32,
    attempts: i32,
    status: String,
    last_status_code: Option<i32>,
    last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    updated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    delivered_at: Option<OffsetDateTime>,
}

/// GET /v1/webhooks/{id}/deliveries (any member): the last 50, newest first.
pub async fn log(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<EndpointId>,
) -> ApiResult<HttpResponse> {
    let e = authorized(
        &state,
        &caller,
        path.into_inner().as_uuid(),
        Capability::Read,
    )
    .await?;
    let rows = sqlx::query_as!(
        Delivery,
        "SELECT id, endpoint_id, event_type AS event, event_id, series, attempts, status, \
           last_status_code, last_error, created_at, updated_at, delivered_at \
         FROM deliveries WHERE endpoint_id = $1 ORDER BY created_at DESC, id DESC LIMIT 50",
        e.id,
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(rows))
}

/// POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry (developer or
/// above): the same event again, as a new attempt series (due now); 201. One
/// delivery (an event at an endpoint) is retried by hand at most
/// `webhooks.max_manual_retries` times, whichever of its rows is named: 409
/// beyond.
pub async fn retry(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(EndpointId, DeliveryId)>,
) -> ApiResult<HttpResponse> {
    let (endpoint, delivery) = path.into_inner();
    let (endpoint, delivery) = (endpoint.as_uuid(), delivery.as_uuid());
    let e = authorized(&state, &caller, endpoint, Capability::ManageWebhooks).await?;
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    // The endpoint's row, locked: its retries take turns (the count below is
    // exact under concurrent requests), and a deletion waits for this one (and
    // then stops the new row) or comes first (and this one is a 404).
    let live = sqlx::query_scalar!(
        "SELECT id FROM endpoints WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE",
        e.id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    live.ok_or(ApiError::NotFound)?;
    let series = sqlx::query_scalar!(
        "SELECT max(x.series) FROM deliveries d \
         JOIN deliveries x ON x.endpoint_id = d.endpoint_id AND x.event_id = d.event_id \
         WHERE d.id = $1 AND d.endpoint_id = $2",
        delivery,
        e.id,
    )
    .fetch_one(&mut *tx)
    .await?;
    let series = series.ok_or(ApiError::NotFound)?;
    let cap = state.webhooks.max_manual_retries;
    if series >= cap {
        return Err(ApiError::Conflict(format!(
            "this delivery was already retried {cap} times, the most allowed"
        )));
    }
    let row = sqlx::query_as!(
        Delivery,
        "INSERT INTO deliveries (endpoint_id, org_id, event_id, event_type, payload, series, next_attempt_at, created_at, updated_at) \
         SELECT d.endpoint_id, d.org_id, d.event_id, d.event_type, d.payload, $3, $4, $4, $4 \
         FROM deliveries d WHERE d.id = $1 AND d.endpoint_id = $2 \
         RETURNING id, endpoint_id, event_type AS event, event_id, series, attempts, status, \
           last_status_code, last_error, created_at, updated_at, delivered_at",
        delivery,
        e.id,
        series + 1,
        now,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    state.wake.notify_one();
    Ok(HttpResponse::Created().json(row))
}
