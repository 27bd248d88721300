//! Organization members (memberships live in identity: /me needs them).

use crate::{audit, memberships, state::AppState};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, Email, OrgId, Role, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, ApiError, ApiResult};

#[derive(Serialize)]
struct Member {
    user_id: UserId,
    email: String,
    role: String,
}

/// GET /v1/organizations/{id}/members: any member (sessions and keys).
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require(org_id, Capability::Read)?;
    let rows: Vec<Member> = sqlx::query_as!(
        Member,
        "SELECT m.user_id, u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id \
         WHERE m.org_id = $1 ORDER BY m.created_at, u.email",
        org_id as OrgId,
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(rows))
}

/// Every member's role in one organization, read under its lock.
struct OrgRoles(Vec<(UserId, Role)>);

impl OrgRoles {
    async fn load(tx: &mut sqlx::PgConnection, org_id: OrgId) -> sqlx::Result<OrgRoles> {
        let rows = sqlx::query!(
            r#"SELECT user_id AS "user_id: UserId", role AS "role: Role" FROM memberships WHERE org_id = $1"#,
            org_id as OrgId,
        )
        .fetch_all(tx)
        .await?;
        Ok(OrgRoles(
            rows.into_iter().map(|r| (r.user_id, r.role)).collect(),
        ))
    }

    fn of(&self, user_id: UserId) -> Option<Role> {
        self.0.iter().find(|(u, _)| *u == user_id).map(|(_, r)| *r)
    }

    /// An owner stops being one (demoted, leaving, removed): only an owner may
    /// do it, and never to the last owner.
    fn may_lose_owner(
        &self,
        caller_role: Role,
        not_owner: &str,
        last_owner: &str,
    ) -> ApiResult<()> {
        if caller_role != Role::Owner {
            return Err(ApiError::forbidden(not_owner));
        }
        if self.0.iter().filter(|(_, r)| *r == Role::Owner).count() <= 1 {
            return Err(ApiError::conflict(last_owner));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    email: String,
    role: String,
}

/// POST /v1/organizations/{id}/members: admin (owner or manager), by session
/// only. Adds the member or changes their role, creating the user by email if
/// needed. Only an owner grants or takes away the owner role, and the last
/// owner cannot be demoted. A member who loses admin authority loses the API
/// keys they created in the same transaction. A user belongs to at most
/// `auth.max_memberships_per_user` organizations (409 beyond).
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn add(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<AddMember>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    let caller_role = caller.require_session(org_id, Capability::Admin)?;
    let email = Email::parse(&body.email).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let role = Role::parse(&body.role).ok_or_else(|| {
        ApiError::bad_request("role must be owner, manager, finance, developer or visitor")
    })?;
    if role == Role::Owner && caller_role != Role::Owner {
        return Err(ApiError::forbidden(
            "insufficient role: requires owner to grant the owner role",
        ));
    }

    let mut tx = state.pool.begin().await?;
    memberships::lock_org(&mut tx, org_id).await?;
    let user_id = crate::users::upsert_by_email(&mut tx, &email).await?;
    memberships::lock_user(&mut tx, user_id).await?;
    let roles = OrgRoles::load(&mut tx, org_id).await?;
    let previous = roles.of(user_id);
    if previous == Some(Role::Owner) && role != Role::Owner {
        roles.may_lose_owner(
            caller_role,
            "insufficient role: requires owner to change an owner",
            "the last owner cannot be demoted",
        )?;
    }
    if previous.is_none() {
        let cap = state.auth.max_memberships_per_user;
        let count: i64 = sqlx::query_scalar!(
            r#"SELECT count(*) AS "n!" FROM memberships WHERE user_id = $1"#,
            user_id as UserId,
        )
        .fetch_one(&mut *tx)
        .await?;
        if count >= cap {
            return Err(ApiError::Conflict(format!(
                "this user already belongs to the maximum of {cap} organizations"
            )));
        }
    }
    if previous != Some(role) {
        sqlx::query!(
            "INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3) \
             ON CONFLICT (org_id, user_id) DO UPDATE SET role = EXCLUDED.role, updated_at = now()",
            org_id as OrgId,
            user_id as UserId,
            role.as_str(),
        )
        .execute(&mut *tx)
        .await?;
        let action = if previous.is_some() {
            event_contracts::AuditAction::MemberRoleChanged
        } else {
            event_contracts::AuditAction::MemberAdded
        };
        audit::record(
            &mut tx,
            Some(caller.user_id()),
            action,
            &format!("org:{org_id}"),
            json!({"org_id": org_id, "user_id": user_id, "email": email.as_str(), "role": role,
                   "previous_role": previous}),
            &caller.ip,
        )
        .await?;
        memberships::announce(&mut tx, &state.naming, org_id, user_id, Some(role)).await?;
        if memberships::is_admin(previous) && !memberships::is_admin(Some(role)) {
            revoke_keys(
                &mut tx,
                &state,
                &caller,
                org_id,
                user_id,
                "admin_authority_lost",
            )
            .await?;
        }
    }
    tx.commit().await?;
    state.publish_now().await;
    Ok(HttpResponse::Ok()
        .insert_header(service_kit::http::identity_changed(user_id))
        .json(Member {
            user_id,
            email: email.as_str().to_owned(),
            role: role.as_str().to_owned(),
        }))
}

/// Revoke the keys `user_id` created in `org_id` and audit it (caller's transaction).
async fn revoke_keys(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    caller: &Caller,
    org_id: OrgId,
    user_id: UserId,
    reason: &str,
) -> ApiResult<Vec<hub_domain::ApiKeyId>> {
    let revoked =
        memberships::revoke_keys_created_by(&mut *tx, &state.naming, org_id, user_id).await?;
    if !revoked.is_empty() {
        audit::record(
            tx,
            Some(caller.user_id()),
            event_contracts::AuditAction::ApiKeysRevoked,
            &format!("org:{org_id}"),
            json!({"org_id": org_id, "created_by": user_id, "key_ids": revoked, "reason": reason}),
            &caller.ip,
        )
        .await?;
    }
    Ok(revoked)
}

/// DELETE /v1/organizations/{id}/members/{user_id}, by session: a member
/// leaves (their own id: any role), or an admin removes someone (only an owner
/// removes an owner). The last owner can neither leave nor be removed (409).
/// The keys the member created are revoked in the same transaction.
#[tracing::instrument(skip_all)]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, UserId)>,
) -> ApiResult<HttpResponse> {
    let (org_id, user_id) = path.into_inner();
    let caller_role = if user_id == caller.user_id() {
        caller.require_session(org_id, Capability::Read)?
    } else {
        caller.require_session(org_id, Capability::Admin)?
    };
    let mut tx = state.pool.begin().await?;
    memberships::lock_org(&mut tx, org_id).await?;
    let roles = OrgRoles::load(&mut tx, org_id).await?;
    let role = roles.of(user_id).ok_or(ApiError::NotFound)?;
    if role == Role::Owner {
        roles.may_lose_owner(
            caller_role,
            "insufficient role: requires owner to remove an owner",
            "the last owner cannot leave the organization",
        )?;
    }
    sqlx::query!(
        "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2",
        org_id as OrgId,
        user_id as UserId,
    )
    .execute(&mut *tx)
    .await?;
    let action = if user_id == caller.user_id() {
        event_contracts::AuditAction::MemberLeft
    } else {
        event_contracts::AuditAction::MemberRemoved
    };
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        action,
        &format!("org:{org_id}"),
        json!({"org_id": org_id, "user_id": user_id, "previous_role": role}),
        &caller.ip,
    )
    .await?;
    memberships::announce(&mut tx, &state.naming, org_id, user_id, None).await?;
    revoke_keys(
        &mut tx,
        &state,
        &caller,
        org_id,
        user_id,
        "membership_ended",
    )
    .await?;
    tx.commit().await?;
    state.publish_now().await;
    Ok(HttpResponse::Ok()
        .insert_header(service_kit::http::identity_changed(user_id))
        .json(json!({"status": "removed"})))
}
