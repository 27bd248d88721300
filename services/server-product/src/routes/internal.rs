//! Routes for calling services only (`/internal/...`).

use crate::{servers::store, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::OrgId;
use serde_json::json;
use service_kit::{
    assertion::{from, Peer},
    ApiResult,
};

/// GET /internal/v1/organizations/{id}/servers/live (org-billing): how many
/// servers of the organization are live (neither terminated nor failed), as
/// the database counts them; org-billing refuses to close an organization
/// while any is.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn live_servers(
    state: web::Data<AppState>,
    _peer: Peer<from::OrgBilling>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    let mut conn = state.pool.acquire().await?;
    let live = store::live_servers(&mut conn, &[org])
        .await?
        .first()
        .map_or(0, |(_, n)| *n);
    Ok(HttpResponse::Ok().json(json!({ "live": live })))
}
