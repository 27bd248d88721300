//! The delivery log and manual redelivery.

use super::endpoints::authorized;
use crate::{state::AppState, store};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, DeliveryId, EndpointId};
use service_kit::{assertion::Caller, ApiError, ApiResult};

/// GET /v1/webhooks/{id}/deliveries (any member): the last 50, newest first.
pub async fn log(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<EndpointId>,
) -> ApiResult<HttpResponse> {
    let e = authorized(&state, &caller, path.into_inner(), Capability::Read).await?;
    Ok(HttpResponse::Ok().json(store::deliveries(&state.pool, e.id).await?))
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
    let e = authorized(&state, &caller, endpoint, Capability::ManageWebhooks).await?;
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    // The endpoint's row, locked: its retries take turns (the count below is
    // exact under concurrent requests), and a deletion waits for this one (and
    // then stops the new row) or comes first (and this one is a 404).
    store::lock_live(&mut tx, e.id).await?;
    let series = store::latest_series(&mut tx, delivery, e.id).await?;
    let cap = state.webhooks.max_manual_retries;
    if series >= cap {
        return Err(ApiError::Conflict(format!(
            "this delivery was already retried {cap} times, the most allowed"
        )));
    }
    let row = store::requeue(&mut tx, delivery, e.id, series + 1, now).await?;
    tx.commit().await?;
    state.wake.notify_one();
    Ok(HttpResponse::Created().json(row))
}
