//! Staff review: the pending queue across organizations, and the decisions.
//!
//! A decision locks its submission row: of two concurrent decisions on one
//! submission exactly one finds it pending; the other gets 409. Staff checks
//! come first (403 whatever the body); an unknown submission is 404.

use super::body::json_body;
use crate::{
    orgs::{self, Change},
    payload::LegalIdentity,
    state::AppState,
    store,
    submission::{ReviewStatus, Row},
};
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::SubmissionId;
use serde_json::{json, Value};
use service_kit::{assertion::StaffCaller, outbox, ApiError, ApiResult};

/// Longest review note, in characters.
pub const NOTES_MAX: usize = 2000;

/// GET /v1/admin/kyc (staff): pending submissions across organizations,
/// oldest first, with the organization's name.
#[tracing::instrument(skip_all)]
pub async fn queue(state: web::Data<AppState>, _staff: StaffCaller) -> ApiResult<HttpResponse> {
    let rows = store::pending(&state.pool).await?;
    let out = rows
        .into_iter()
        .map(|r| r.resource(&state, true))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(HttpResponse::Ok().json(out))
}

/// What tells the staff decisions apart; [`decide`] is the one path they share.
struct Decision {
    /// The submission's status after it.
    status: ReviewStatus,
    /// What the audit log records.
    audit: AuditAction,
    /// Whether the body takes `requested_fields` (keys of the submission)
    /// besides `notes`.
    requests_fields: bool,
}

const APPROVE: Decision = Decision {
    status: ReviewStatus::Approved,
    audit: AuditAction::KycApproved,
    requests_fields: false,
};

const REJECT: Decision = Decision {
    status: ReviewStatus::Rejected,
    audit: AuditAction::KycRejected,
    requests_fields: false,
};

const REQUEST_INFO: Decision = Decision {
    status: ReviewStatus::MoreInfoRequested,
    audit: AuditAction::KycMoreInfoRequested,
    requests_fields: true,
};

/// `notes` (optional string) and, for request-info, `requested_fields`, from
/// a JSON object; no body at all is the empty object (approve and reject take
/// an optional one), while a body that is JSON but not an object (`null`, an
/// array, a string) is refused, as the documented schema refuses it.
fn parse_body(body: &[u8], request_info: bool) -> ApiResult<(String, Vec<String>)> {
    let obj = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        match json_body(body)? {
            Value::Object(m) => m,
            _ => return Err(ApiError::bad_request("the body must be a JSON object")),
        }
    };
    let allowed: &[&str] = if request_info {
        &["notes", "requested_fields"]
    } else {
        &["notes"]
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::BadRequest(format!("unknown field {k}")));
    }
    let notes = match obj.get("notes") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.chars().count() <= NOTES_MAX && !s.contains('\0') => {
            s.trim().to_owned()
        }
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "notes must be a string of at most {NOTES_MAX} characters"
            )))
        }
    };
    let requested = if request_info {
        let list = obj
            .get("requested_fields")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                ApiError::bad_request("requested_fields must be a non-empty array of field keys")
            })?;
        let mut out = Vec::with_capacity(list.len());
        for v in list {
            let k = v.as_str().ok_or_else(|| {
                ApiError::bad_request("requested_fields must be a non-empty array of field keys")
            })?;
            if !out.iter().any(|o| o == k) {
                out.push(k.to_owned());
            }
        }
        out
    } else {
        Vec::new()
    };
    Ok((notes, requested))
}

/// Submission `id`, locked, if it is still pending (409 naming its status
/// otherwise, 404 when there is none).
async fn lock_pending(tx: &mut sqlx::PgConnection, id: SubmissionId) -> ApiResult<Row> {
    let row = store::lock(tx, id).await?.ok_or(ApiError::NotFound)?;
    if row.status != ReviewStatus::Pending {
        return Err(ApiError::Conflict(format!(
            "this submission was already reviewed ({})",
            row.status
        )));
    }
    Ok(row)
}

/// Whether `requested` fits `row`: requested fields must be keys of it.
fn check_requested(requested: &[String], row: &Row) -> ApiResult<()> {
    if let Some(k) = requested.iter().find(|k| !row.field_keys.contains(k)) {
        return Err(ApiError::BadRequest(format!(
            "requested_fields: {k} is not a key of this submission (one of {})",
            row.field_keys.join(", ")
        )));
    }
    Ok(())
}

/// On approval, the organization's legal identity from `row`'s payload.
fn approved_identity(
    state: &AppState,
    decision: &Decision,
    row: &Row,
) -> ApiResult<Option<LegalIdentity>> {
    if decision.status != ReviewStatus::Approved {
        return Ok(None);
    }
    let payload = row
        .payload(state)?
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("pending submission without payload")))?;
    Ok(Some(payload.legal_identity(row.legal_type)))
}

/// Decide pending submission `id` as `decision` says, in one transaction: the
/// submission, its organization's state and the audit record.
async fn decide(
    state: &AppState,
    staff: &StaffCaller,
    id: SubmissionId,
    body: &[u8],
    decision: &Decision,
) -> ApiResult<HttpResponse> {
    let (notes, requested) = parse_body(body, decision.requests_fields)?;
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    let row = lock_pending(&mut tx, id).await?;
    check_requested(&requested, &row)?;
    let change = approved_identity(state, decision, &row)?;
    let updated = store::decide(
        &mut tx,
        id,
        decision.status,
        &notes,
        &requested,
        staff.user_id(),
        now,
    )
    .await?;
    let org_change = match (decision.status, &change) {
        (ReviewStatus::Approved, Some(identity)) => Change::Approved(identity, now),
        (ReviewStatus::Rejected, _) => Change::Rejected,
        _ => Change::MoreInfoRequested,
    };
    orgs::change(&mut tx, state, row.org_id, org_change).await?;
    // Ids and field keys only: never the submitted data or the notes.
    outbox::audit(
        &mut tx,
        &state.naming,
        staff,
        decision.audit,
        row.org_id,
        json!({"org_id": row.org_id, "submission_id": id, "requested_fields": requested}),
    )
    .await?;
    tx.commit().await?;
    orgs::push(state, row.org_id).await;
    Ok(HttpResponse::Ok().json(updated.resource(state, true)?))
}

/// POST /v1/admin/kyc/{id}/approve (staff), optional `notes`.
#[tracing::instrument(skip_all, fields(submission_id = %path))]
pub async fn approve(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<SubmissionId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    decide(&state, &staff, path.into_inner(), &body, &APPROVE).await
}

/// POST /v1/admin/kyc/{id}/reject (staff), optional `notes`.
#[tracing::instrument(skip_all, fields(submission_id = %path))]
pub async fn reject(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<SubmissionId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    decide(&state, &staff, path.into_inner(), &body, &REJECT).await
}

/// POST /v1/admin/kyc/{id}/request-info (staff): `requested_fields` (keys of
/// the submission: `fields.<key>`, `address.<key>`), optional `notes`.
#[tracing::instrument(skip_all, fields(submission_id = %path))]
pub async fn request_info(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<SubmissionId>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    decide(&state, &staff, path.into_inner(), &body, &REQUEST_INFO).await
}
