//! An entity's observers: staff name and remove them, staff and the entity's
//! observers list them. An observer is a user identity knows (created by
//! email when missing); every change is an audit event of the staff member.

use super::{authorize_read, model::StaffRole, store};
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::{internal::UserByEmail, AuditAction};
use hub_domain::{DistributorId, Email, TextEnum, UserId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{Caller, StaffCaller},
    outbox, ApiError, ApiResult,
};

/// GET /v1/distributors/{id}/staff: staff, or an observer of the entity.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn staff_list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<DistributorId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    authorize_read(&state, &caller, id).await?;
    let mut conn = state.pool.acquire().await?;
    Ok(HttpResponse::Ok().json(store::staff_of(&mut conn, id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddStaff {
    email: String,
    role: String,
}

/// The user with `email` (created when missing), from identity.
async fn user_by_email(state: &AppState, caller: &Caller, email: &Email) -> ApiResult<UserByEmail> {
    let resp = state
        .identity
        .call(
            reqwest::Method::POST,
            "/internal/v1/users",
            caller,
            &json!({"email": email.as_str()}),
        )
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "identity unreachable");
            ApiError::Unavailable("users are unavailable, try again".into())
        })?;
    match resp.status().as_u16() {
        200 => resp
            .json::<UserByEmail>()
            .await
            .map_err(|e| ApiError::internal(anyhow::anyhow!("identity's user answer: {e}"))),
        s => Err(ApiError::internal(anyhow::anyhow!(
            "identity answered {s} to a user lookup"
        ))),
    }
}

/// POST /v1/distributors/{id}/staff (staff): `{email, role: "observer"}`;
/// the user is created by email when missing (they sign in with it). 201
/// DistributorStaffMember; 409 when they are on the staff already.
#[tracing::instrument(skip_all, fields(distributor_id = %path))]
pub async fn staff_add(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<DistributorId>,
    body: web::Json<AddStaff>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let email = Email::parse(&body.email).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let role = StaffRole::from_name(&body.role).ok_or_else(|| {
        ApiError::BadRequest(format!("role must be one of {}", StaffRole::names()))
    })?;
    {
        let mut conn = state.pool.acquire().await?;
        if store::one(&mut conn, id).await?.is_none() {
            return Err(ApiError::NotFound);
        }
    }
    let user = user_by_email(&state, &staff, &email).await?;
    let mut tx = state.pool.begin().await?;
    let member = store::add_staff(&mut tx, id, user.user_id, &user.email, role).await?;
    outbox::audit_on(
        &mut tx,
        &state.naming,
        &staff,
        AuditAction::DistributorStaffAdded,
        format!("distributor:{id}"),
        json!({"distributor_id": id, "user_id": member.user_id, "email": member.email,
               "role": member.role}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(member))
}

/// DELETE /v1/distributors/{id}/staff/{user_id} (staff): 200
/// `{"status": "removed"}`; 404 when they are not on the staff.
#[tracing::instrument(skip_all)]
pub async fn staff_remove(
    staff: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<(DistributorId, UserId)>,
) -> ApiResult<HttpResponse> {
    let (id, user_id) = path.into_inner();
    let mut tx = state.pool.begin().await?;
    if !store::remove_staff(&mut tx, id, user_id).await? {
        return Err(ApiError::NotFound);
    }
    outbox::audit_on(
        &mut tx,
        &state.naming,
        &staff,
        AuditAction::DistributorStaffRemoved,
        format!("distributor:{id}"),
        json!({"distributor_id": id, "user_id": user_id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(json!({"status": "removed"})))
}
