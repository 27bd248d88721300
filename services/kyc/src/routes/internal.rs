//! Internal routes (never routed by the gateway; open only to the callers
//! kyc lists in `assertion.callers`).

use crate::{orgs, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::OrgId;
use service_kit::{
    assertion::{from, Peer},
    ApiResult,
};

/// GET /internal/v1/organizations/{id}/kyc-state (org-billing): the state to
/// apply, legal identity included, when a core.v1.kyc.changed event arrives.
pub async fn kyc_state(
    state: web::Data<AppState>,
    _peer: Peer<from::OrgBilling>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let mut conn = state.pool.acquire().await?;
    let current = orgs::load(&mut conn, &state, path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(current))
}

/// GET /internal/v1/organizations/{id}/kyc-status (server-product): the
/// status alone, for a deployment that requires `verified` before a paid
/// order (`orders.require_kyc_for_paid`); nothing sealed is opened.
pub async fn kyc_status(
    state: web::Data<AppState>,
    _peer: Peer<from::ServerProduct>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let mut conn = state.pool.acquire().await?;
    let current = orgs::status(&mut conn, path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(current))
}
