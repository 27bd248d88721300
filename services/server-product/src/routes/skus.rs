//! The public catalog.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use serde::Serialize;
use service_kit::{assertion::RequestCtx, ApiResult};

#[derive(Serialize, sqlx::FromRow)]
struct Sku {
    id: String,
    name: String,
    fulfilment: String,
    sla_hours: Option<i32>,
    badges: Vec<String>,
    monthly_price_minor: i64,
    currency: String,
}

/// GET /v1/skus (public): listed SKUs in catalog order.
pub async fn list(state: web::Data<AppState>, _ctx: RequestCtx) -> ApiResult<HttpResponse> {
    let skus: Vec<Sku> = sqlx::query_as(
        "SELECT id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency \
         FROM skus WHERE listed ORDER BY position, id",
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(skus))
}
