//! The caller's own audit history.

use crate::{audit, state::AppState};
use actix_web::{web, HttpResponse};
use service_kit::{assertion::SessionCaller, page, ApiResult};

/// GET /v1/audit/me?limit=&cursor=: newest first, `limit` entries (1 to
/// `auth.audit_page`, default `auth.audit_page`) at a time; a page with more
/// names the next in `x-next-cursor` and `Link: rel="next"`.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn mine(
    state: web::Data<AppState>,
    caller: SessionCaller,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let max = state.auth.audit_page;
    let limit = page::limit(q.limit, max, max)?;
    let before = page::seq::after(q.cursor.as_deref())?;
    let rows = audit::of_actor(&state.pool, caller.user_id(), before, limit + 1).await?;
    Ok(page::seq::respond(
        rows,
        limit,
        |e| e.id,
        |c| format!("/v1/audit/me?limit={limit}&cursor={c}"),
    ))
}
