//! Internal routes for kyc (never routed by the gateway; open only to the
//! callers org-billing lists in `assertion.callers`).

use crate::{kyc, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::OrgId;
use serde_json::json;
use service_kit::{assertion::RequestCtx, ApiError, ApiResult};

/// GET /internal/v1/organizations/{id}/profile (kyc): name and legal type.
pub async fn profile(
    state: web::Data<AppState>,
    _ctx: RequestCtx,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let row: Option<(String, String, String)> =
        sqlx::query_as("SELECT name, legal_type, country::text FROM organizations WHERE id = $1")
            .bind(path.into_inner())
            .fetch_optional(&state.pool)
            .await?;
    let (name, legal_type, country) = row.ok_or(ApiError::NotFound)?;
    Ok(
        HttpResponse::Ok()
            .json(json!({"name": name, "legal_type": legal_type, "country": country})),
    )
}

/// PUT /internal/v1/organizations/{id}/kyc-state (kyc): apply a KYC state
/// (the fast path; `applied` is false when it was not newer).
pub async fn kyc_state(
    state: web::Data<AppState>,
    _ctx: RequestCtx,
    path: web::Path<OrgId>,
    body: web::Json<kyc::KycState>,
) -> ApiResult<HttpResponse> {
    let applied = kyc::apply(&state, path.into_inner(), &body).await?;
    Ok(HttpResponse::Ok().json(json!({"applied": applied})))
}
