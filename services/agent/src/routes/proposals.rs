//! Platform proposals' routes (see [`crate::proposals`]).

use super::body::body;
use crate::{proposals, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::ProposalId;
use serde::Deserialize;
use service_kit::{
    assertion::{SessionCaller, StaffCaller},
    page, ApiResult,
};

const LIMIT_MAX: i64 = 100;
const LIMIT_DEFAULT: i64 = 50;

/// POST /v1/proposals (session): 201 with the proposal, `draft`.
#[tracing::instrument(skip_all)]
pub async fn file(
    caller: SessionCaller,
    state: web::Data<AppState>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let p: proposals::NewProposal = body(&bytes)?;
    Ok(HttpResponse::Created().json(proposals::file(&state, &caller, &p).await?))
}

/// GET /v1/proposals (session): the caller's proposals, or everyone's for
/// staff; newest first, cursor paged.
#[tracing::instrument(skip_all)]
pub async fn list(
    caller: SessionCaller,
    state: web::Data<AppState>,
    q: web::Query<page::Query>,
) -> ApiResult<HttpResponse> {
    let limit = page::limit(q.limit, LIMIT_DEFAULT, LIMIT_MAX)?;
    let after = page::after(q.cursor.as_deref())?;
    let rows = proposals::list(&state, &caller, after, limit + 1).await?;
    Ok(page::respond(
        rows,
        limit,
        |p| (p.created_at, p.id.as_uuid()),
        |c| match q.limit {
            Some(l) => format!("/v1/proposals?limit={l}&cursor={c}"),
            None => format!("/v1/proposals?cursor={c}"),
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusChange {
    status: proposals::ProposalStatus,
}

/// PATCH /v1/admin/proposals/{id} (staff): `{status}`, one of the allowed
/// moves (409 otherwise).
#[tracing::instrument(skip_all)]
pub async fn set_status(
    staff: StaffCaller,
    state: web::Data<AppState>,
    id: web::Path<ProposalId>,
    bytes: web::Bytes,
) -> ApiResult<HttpResponse> {
    let c: StatusChange = body(&bytes)?;
    Ok(HttpResponse::Ok()
        .json(proposals::set_status(&state, &staff, id.into_inner(), c.status).await?))
}
