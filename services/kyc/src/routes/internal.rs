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
