//! An organization's submissions: the admin submits; the admin roles and
//! finance (and staff) read them in full, other members their status only.
//!
//! One pending submission per organization (a partial unique index, so two
//! concurrent submissions cannot both be pending: the second is a 409). A
//! submission whose review asked for more information does not block a new
//! one: the corrected submission is a new submission.

use super::body::json_body;
use crate::{
    orgs::{self, Change},
    payload::Payload,
    state::AppState,
    store,
    submission::{self, Row},
};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, OrgId, SubmissionId};
use serde_json::json;
use service_kit::{assertion::Caller, outbox, ApiError, ApiResult, OnConstraint};

/// POST /v1/organizations/{id}/kyc (owner or manager): 201 KYCSubmission;
/// the organization's kyc_status becomes pending.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn submit(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require(org_id, Capability::Admin)?;
    let body = json_body(&body)?;
    let org = orgs::profile(&state, &caller, org_id).await?;
    let legal_type = org.legal_type;
    let payload = Payload::parse(legal_type, &body)?;

    let id = SubmissionId::new();
    let sealed = state.sealer.seal_json(&payload, &submission::aad(id))?;
    let mut tx = state.pool.begin().await?;
    let row = store::insert_pending(
        &mut tx,
        store::NewSubmission {
            id,
            org_id,
            org_name: &org.name,
            legal_type,
            sealed: &sealed,
            field_keys: &payload.keys(),
            submitted_by: caller.user_id(),
            at: state.clock.now(),
        },
    )
    .await
    .on_constraint("submissions_one_pending", || {
        ApiError::conflict("another KYC submission of this organization is pending")
    })?;
    orgs::change(&mut tx, &state, org_id, Change::Submitted).await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::KycSubmitted,
        org_id,
        json!({"org_id": org_id, "submission_id": id}),
    )
    .await?;
    tx.commit().await?;
    orgs::push(&state, org_id).await;
    Ok(HttpResponse::Created().json(row.resource(&state, false)?))
}

/// GET /v1/organizations/{id}/kyc: every submission, newest first. Members
/// with KYC reads (owner, manager, finance; sessions and keys alike) and staff
/// (any organization: they review them) get KYCSubmission; any other member
/// gets KYCSubmissionStatus, without the submitted data or the notes; a
/// non-member 404.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    let full = caller.identity.staff
        || caller
            .require(org_id, Capability::Read)?
            .can(Capability::KycRead);
    let rows = store::of_org(&state.pool, org_id).await?;
    if !full {
        let out: Vec<_> = rows.into_iter().map(Row::status_only).collect();
        return Ok(HttpResponse::Ok().json(out));
    }
    let out = rows
        .into_iter()
        .map(|r| r.resource(&state, false))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(HttpResponse::Ok().json(out))
}
