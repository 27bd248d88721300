//! Staff and users (`/v1/admin/users`): find a user, see their memberships,
//! sessions and second factor, disable or enable them, end their sessions.
//! Every change is audited in the staff member's history; a disabled user's
//! sessions and the API keys they created are revoked in the same
//! transaction, and the revocations are published before the answer, so
//! every gateway drops them at once.

use crate::{account, admin_users, audit, state::AppState};
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::UserId;
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::StaffCaller, http::identity_changed, page, ApiError, ApiResult};

/// Longest search text, in characters.
const Q_MAX: usize = 254;
/// Longest disable reason, in characters.
pub const REASON_MAX: usize = 500;
/// Users per search page: default and most.
const PAGE: i64 = 50;
const PAGE_MAX: i64 = 200;

#[derive(Deserialize)]
pub struct SearchQuery {
    q: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// GET /v1/admin/users?q=&status=&limit=&cursor= (staff): users whose id is
/// `q`, or whose email or name starts with it (any case), newest first.
#[tracing::instrument(skip_all)]
pub async fn search(
    state: web::Data<AppState>,
    _staff: StaffCaller,
    query: web::Query<SearchQuery>,
) -> ApiResult<HttpResponse> {
    let q = query.q.as_deref();
    if q.is_some_and(|q| q.chars().count() > Q_MAX) {
        return Err(ApiError::bad_request(format!(
            "q must be at most {Q_MAX} characters"
        )));
    }
    let disabled = match query.status.as_deref() {
        None | Some("") => None,
        Some("active") => Some(false),
        Some("disabled") => Some(true),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "status must be one of active, disabled (not {other:?})"
            )))
        }
    };
    let limit = page::limit(query.limit, PAGE, PAGE_MAX)?;
    let after = page::after(query.cursor.as_deref())?;
    let rows = admin_users::search(
        &state.pool,
        &admin_users::Search {
            q,
            disabled,
            after,
            limit: limit + 1,
        },
    )
    .await?;
    let keep = page::kept(&[("q", q), ("status", query.status.as_deref())]);
    Ok(page::respond(
        rows,
        limit,
        |u| (u.created_at, u.id.as_uuid()),
        |c| format!("/v1/admin/users?{keep}limit={limit}&cursor={c}"),
    ))
}

/// GET /v1/admin/users/{id} (staff).
#[tracing::instrument(skip_all)]
pub async fn get(
    state: web::Data<AppState>,
    _staff: StaffCaller,
    path: web::Path<UserId>,
) -> ApiResult<HttpResponse> {
    let user = admin_users::detail(&state.pool, path.into_inner())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(user))
}

#[derive(Deserialize)]
pub struct DisableBody {
    reason: String,
}

/// POST /v1/admin/users/{id}/disable (staff) `{"reason"}`: no session of the
/// user resolves from now on and none can be opened; their live sessions and
/// every API key they created are revoked. 409 when already disabled; a
/// staff member cannot disable themselves.
#[tracing::instrument(skip_all)]
pub async fn disable(
    state: web::Data<AppState>,
    staff: StaffCaller,
    path: web::Path<UserId>,
    body: web::Json<DisableBody>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let reason = body.reason.trim();
    if reason.is_empty() || reason.chars().count() > REASON_MAX {
        return Err(ApiError::bad_request(format!(
            "reason is required, at most {REASON_MAX} characters"
        )));
    }
    if id == staff.user_id() {
        return Err(ApiError::Conflict("staff cannot disable themselves".into()));
    }
    let mut tx = state.pool.begin().await?;
    match admin_users::lock(&mut tx, id).await? {
        None => return Err(ApiError::NotFound),
        Some(true) => return Err(ApiError::Conflict("the user is already disabled".into())),
        Some(false) => {}
    }
    admin_users::set_disabled(&mut tx, id, Some(reason)).await?;
    let (sessions, keys) = revoke_all(&mut tx, &state, id, true).await?;
    audit::record(
        &mut tx,
        Some(staff.user_id()),
        AuditAction::UserDisabled,
        &format!("user:{id}"),
        json!({"sessions_revoked": sessions, "api_keys_revoked": keys}),
        &staff.ip,
    )
    .await?;
    tx.commit().await?;
    state.publish_now().await;
    Ok(HttpResponse::Ok().insert_header(identity_changed(id)).json(
        json!({"status": "disabled", "sessions_revoked": sessions, "api_keys_revoked": keys}),
    ))
}

/// POST /v1/admin/users/{id}/enable (staff): the user may sign in again (what
/// was revoked stays revoked). 409 when not disabled.
#[tracing::instrument(skip_all)]
pub async fn enable(
    state: web::Data<AppState>,
    staff: StaffCaller,
    path: web::Path<UserId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    match admin_users::lock(&mut tx, id).await? {
        None => return Err(ApiError::NotFound),
        Some(false) => return Err(ApiError::Conflict("the user is not disabled".into())),
        Some(true) => {}
    }
    if account::is_deleted(&mut tx, id).await? {
        return Err(ApiError::Conflict(
            "the account was deleted by its owner: it cannot be enabled".into(),
        ));
    }
    admin_users::set_disabled(&mut tx, id, None).await?;
    audit::record(
        &mut tx,
        Some(staff.user_id()),
        AuditAction::UserEnabled,
        &format!("user:{id}"),
        json!({}),
        &staff.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({"status": "active"})))
}

/// POST /v1/admin/users/{id}/sessions/revoke (staff): end every live session
/// of the user (their API keys stay).
#[tracing::instrument(skip_all)]
pub async fn revoke_sessions(
    state: web::Data<AppState>,
    staff: StaffCaller,
    path: web::Path<UserId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    if admin_users::lock(&mut tx, id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let (sessions, _) = revoke_all(&mut tx, &state, id, false).await?;
    audit::record(
        &mut tx,
        Some(staff.user_id()),
        AuditAction::UserSessionsRevoked,
        &format!("user:{id}"),
        json!({"sessions_revoked": sessions}),
        &staff.ip,
    )
    .await?;
    tx.commit().await?;
    state.publish_now().await;
    Ok(HttpResponse::Ok()
        .insert_header(identity_changed(id))
        .json(json!({"sessions_revoked": sessions})))
}

/// Revoke `id`'s live sessions (and, with `keys`, every API key they
/// created), each revocation queued for the gateways: how many of each.
async fn revoke_all(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    id: UserId,
    keys: bool,
) -> ApiResult<(usize, usize)> {
    let sessions = crate::sessions::revoke_all(&mut *tx, id, None).await?;
    crate::sessions::enqueue_revoked(&mut *tx, &state.naming, id, &sessions).await?;
    let revoked_keys = if keys {
        admin_users::revoke_keys(&mut *tx, id).await?
    } else {
        Vec::new()
    };
    crate::api_keys::enqueue_revoked(&mut *tx, &state.naming, &revoked_keys).await?;
    Ok((sessions.len(), revoked_keys.len()))
}
