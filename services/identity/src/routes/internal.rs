//! Service-to-service endpoints (never routed by the gateway; they still need a
//! signed assertion, which only holders of the internal key can make).

use crate::{memberships, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::OrgId;
use serde_json::json;
use service_kit::{assertion::Caller, ApiResult};

/// POST /internal/v1/organizations/{id}/owner: org-billing's read-your-writes
/// fast path after creating an organization: the asserted caller becomes its
/// first owner (a no-op once the organization has members).
pub async fn creator_owner(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let inserted =
        memberships::ensure_creator_owner(&state, path.into_inner(), caller.user_id()).await?;
    Ok(HttpResponse::Ok().json(json!({ "created": inserted })))
}
