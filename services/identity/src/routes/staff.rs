//! Staff membership through the API (`/v1/admin/staff`): list who is staff,
//! grant and take back staff. The configured `auth.staff_emails` stay the
//! bootstrap, changed only in configuration. A change needs a staff member
//! whose session was opened through MFA; it is audited in their history,
//! mailed to every other staff member, and the grantee's cached identity is
//! dropped at every gateway before the answer.

use crate::{audit, mail::StaffChange, staff, state::AppState};
use actix_web::{web, HttpResponse};
use event_contracts::{AuditAction, IdentityChanged};
use hub_domain::{SessionId, UserId};
use serde_json::json;
use service_kit::{assertion::StaffCaller, http::identity_changed, outbox, ApiError, ApiResult};
use sqlx::PgConnection;

/// GET /v1/admin/staff (staff): configured addresses, then grants.
#[tracing::instrument(skip_all)]
pub async fn list(state: web::Data<AppState>, _staff: StaffCaller) -> ApiResult<HttpResponse> {
    let members = staff::list(&state.pool, &state.configured_staff()).await?;
    Ok(HttpResponse::Ok().json(members))
}

/// PUT /v1/admin/staff/{user_id} (staff through MFA): make the user staff.
/// 200 either way; only a new grant is audited and mailed.
#[tracing::instrument(skip_all)]
pub async fn grant(
    state: web::Data<AppState>,
    caller: StaffCaller,
    path: web::Path<UserId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    let actor = through_mfa(&mut tx, &caller).await?;
    let subject = user(&mut tx, id).await?;
    if subject.disabled {
        return Err(ApiError::Conflict(
            "the user is disabled: enable them first".into(),
        ));
    }
    // A configured address is staff already: a grant beside it would keep
    // them staff once the configuration drops them.
    let configured = state.is_staff(&subject.email);
    let new = !configured && staff::grant(&mut tx, id, caller.user_id()).await?;
    if new {
        changed(
            &mut tx,
            &state,
            &caller,
            id,
            "granted",
            &subject.email,
            &actor,
        )
        .await?;
    }
    tx.commit().await?;
    after_change(&state, new).await;
    Ok(HttpResponse::Ok()
        .insert_header(identity_changed(id))
        .json(json!({
            "user_id": id,
            "email": subject.email,
            "source": if configured { staff::Source::Configured } else { staff::Source::Granted },
        })))
}

/// DELETE /v1/admin/staff/{user_id} (staff through MFA): take the user's
/// grant back. 404 without a grant; 409 for a configured address (only
/// configuration changes those).
#[tracing::instrument(skip_all)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: StaffCaller,
    path: web::Path<UserId>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    let actor = through_mfa(&mut tx, &caller).await?;
    let subject = user(&mut tx, id).await?;
    if state.is_staff(&subject.email) {
        return Err(ApiError::Conflict(
            "staff by configuration (auth.staff_emails): change the configuration".into(),
        ));
    }
    if !staff::revoke(&mut tx, id).await? {
        return Err(ApiError::NotFound);
    }
    changed(
        &mut tx,
        &state,
        &caller,
        id,
        "revoked",
        &subject.email,
        &actor,
    )
    .await?;
    tx.commit().await?;
    after_change(&state, true).await;
    Ok(HttpResponse::NoContent()
        .insert_header(identity_changed(id))
        .finish())
}

/// The caller's address, if their session was opened through MFA (403
/// otherwise: a stolen link alone must not make staff).
async fn through_mfa(conn: &mut PgConnection, caller: &StaffCaller) -> ApiResult<String> {
    let row = sqlx::query!(
        "SELECT s.mfa, u.email FROM sessions s JOIN users u ON u.id = s.user_id \
          WHERE s.id = $1 AND s.user_id = $2",
        SessionId::from(caller.credential.id) as SessionId,
        caller.user_id() as UserId,
    )
    .fetch_optional(conn)
    .await?;
    match row {
        Some(r) if r.mfa => Ok(r.email),
        _ => Err(ApiError::Forbidden(
            "changing staff needs a session opened through MFA".into(),
        )),
    }
}

struct Subject {
    email: String,
    disabled: bool,
}

/// User `id`, locked until the transaction ends (404 when there is none).
async fn user(conn: &mut PgConnection, id: UserId) -> ApiResult<Subject> {
    sqlx::query!(
        r#"SELECT email, disabled_at IS NOT NULL AS "disabled!" FROM users WHERE id = $1 FOR UPDATE"#,
        id as UserId,
    )
    .fetch_optional(conn)
    .await?
    .map(|r| Subject {
        email: r.email,
        disabled: r.disabled,
    })
    .ok_or(ApiError::NotFound)
}

/// Audit the change, tell every gateway the user's identity changed, and
/// queue the notice to every other staff member and to the user (caller's
/// transaction).
async fn changed(
    tx: &mut PgConnection,
    state: &AppState,
    caller: &StaffCaller,
    id: UserId,
    change: &str,
    subject_email: &str,
    actor_email: &str,
) -> ApiResult<()> {
    let action = if change == "granted" {
        AuditAction::StaffGranted
    } else {
        AuditAction::StaffRevoked
    };
    audit::record(
        &mut *tx,
        Some(caller.user_id()),
        action,
        &format!("user:{id}"),
        json!({}),
        &caller.ip,
    )
    .await?;
    outbox::enqueue(&mut *tx, &state.naming, IdentityChanged { user_id: id })
        .await
        .map_err(ApiError::internal)?;
    match &state.mailer {
        Some(m) => {
            // Every staff member but the one who acted, and the user whose
            // status changed (a revoked one is no longer staff).
            let mut to = staff::addresses(&mut *tx, &state.configured_staff(), actor_email).await?;
            if subject_email != actor_email && !to.iter().any(|e| e == subject_email) {
                to.push(subject_email.to_owned());
            }
            m.enqueue_staff_change(
                &mut *tx,
                &to,
                &StaffChange {
                    change: change.into(),
                    subject: subject_email.into(),
                    by: actor_email.into(),
                },
            )
            .await
            .map_err(ApiError::internal)?;
        }
        None => tracing::warn!(%id, change, "staff changed: no mail server, staff are not told"),
    }
    Ok(())
}

/// Publish the invalidation and wake the mail worker (after the commit).
async fn after_change(state: &AppState, changed: bool) {
    if changed {
        state.publish_now().await;
        if let Some(m) = &state.mailer {
            m.kick();
        }
    }
}
