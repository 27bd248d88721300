//! The caller's own audit history.

use crate::{audit, state::AppState};
use actix_web::{web, HttpResponse};
use service_kit::{assertion::SessionCaller, ApiResult};

/// GET /v1/audit/me: newest first, at most `auth.audit_page` entries.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn mine(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let rows = audit::of_actor(&state.pool, caller.user_id(), state.auth.audit_page).await?;
    Ok(HttpResponse::Ok().json(rows))
}
