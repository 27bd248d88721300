//! A user's own personal data: `GET /v1/auth/me/export` (identity's part of
//! the export; the gateway answers the route and adds the agent's part) and
//! `DELETE /v1/auth/me` (the account, erased or pseudonymized as
//! decisions.md states, "Deleting an account").

use crate::{account, admin_users, audit, memberships, state::AppState};
use actix_web::{web, HttpResponse};
use event_contracts::{AuditAction, UserDeleted};
use hub_domain::UserId;
use serde_json::json;
use service_kit::{assertion::SessionCaller, http::identity_changed, outbox, ApiError, ApiResult};

/// GET /v1/auth/me/export (session): identity's part of the user's data.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn export(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let id = caller.user_id();
    let data = account::export(&state.pool, id).await?;
    let mut tx = state.pool.begin().await?;
    audit::record(
        &mut tx,
        Some(id),
        AuditAction::UserDataExported,
        &format!("user:{id}"),
        json!({}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(data))
}

/// DELETE /v1/auth/me (session): delete the caller's account. 409 while they
/// are the only owner of an organization. In one transaction: every
/// membership ends (announced like a removal), every session and every API
/// key they created is revoked (each revocation published before the
/// answer), identity's personal fields are erased, and `UserDeleted` goes to
/// the services that hold more (the agent erases memory and conversations).
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn delete(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let id = caller.user_id();
    let mut tx = state.pool.begin().await?;
    // Locks in the order a member add takes them (an organization, the user's
    // row, the user's lock): every organization's lock, sorted, so that no
    // other owner leaves before the owner check; then the row; then the user's.
    let orgs = account::organizations(&mut tx, id).await?;
    for org in &orgs {
        memberships::lock_org(&mut tx, *org).await?;
    }
    let email = lock(&mut tx, id).await?;
    memberships::lock_user(&mut tx, id).await?;
    if account::organizations(&mut tx, id).await? != orgs {
        return Err(ApiError::Conflict(
            "your memberships changed while the account was being deleted: try again".into(),
        ));
    }
    let sole = account::sole_owner_of(&mut tx, id).await?;
    if !sole.is_empty() {
        let ids: Vec<String> = sole.iter().map(ToString::to_string).collect();
        return Err(ApiError::Conflict(format!(
            "you are the only owner of {} organization(s) ({}): make another member owner, or close it, first",
            sole.len(),
            ids.join(", ")
        )));
    }
    for org in &orgs {
        memberships::remove(&mut tx, *org, id).await?;
        memberships::announce(&mut tx, &state.naming, *org, id, None)
            .await
            .map_err(ApiError::internal)?;
    }
    let sessions = crate::sessions::revoke_all(&mut tx, id, None).await?;
    crate::sessions::enqueue_revoked(&mut tx, &state.naming, id, &sessions)
        .await
        .map_err(ApiError::internal)?;
    let keys = admin_users::revoke_keys(&mut tx, id).await?;
    crate::api_keys::enqueue_revoked(&mut tx, &state.naming, &keys)
        .await
        .map_err(ApiError::internal)?;
    account::erase(&mut tx, id, &email).await?;
    // No IP: the entry outlives the person it would identify.
    audit::record(
        &mut tx,
        Some(id),
        AuditAction::UserDeleted,
        &format!("user:{id}"),
        json!({
            "memberships_ended": orgs.len(),
            "sessions_revoked": sessions.len(),
            "api_keys_revoked": keys.len(),
        }),
        "",
    )
    .await?;
    outbox::enqueue(&mut tx, &state.naming, UserDeleted { user_id: id })
        .await
        .map_err(ApiError::internal)?;
    tx.commit().await?;
    state.publish_now().await;
    Ok(HttpResponse::Ok()
        .insert_header(identity_changed(id))
        .json(json!({
            "status": "deleted",
            "memberships_ended": orgs.len(),
            "sessions_revoked": sessions.len(),
            "api_keys_revoked": keys.len(),
        })))
}

/// The caller's address, their row locked until the transaction ends.
async fn lock(conn: &mut sqlx::PgConnection, id: UserId) -> ApiResult<String> {
    sqlx::query_scalar!(
        "SELECT email FROM users WHERE id = $1 AND deleted_at IS NULL FOR UPDATE",
        id as UserId,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(ApiError::NotFound)
}
