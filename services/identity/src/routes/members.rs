//! Organization members (memberships live in identity: /me needs them).

use crate::{
    audit,
    memberships::{self, Error, OrgRoles},
    state::AppState,
};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, Email, OrgId, Role, UserId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{Authority, Caller},
    ApiError, ApiResult,
};

impl From<Error> for ApiError {
    #[track_caller]
    fn from(e: Error) -> Self {
        match e {
            Error::OwnerOnly(m) => ApiError::forbidden(m),
            Error::LastOwner(m) => ApiError::conflict(m),
            Error::NotMember => ApiError::NotFound,
            Error::AtCap(cap) => ApiError::Conflict(format!(
                "this user already belongs to the maximum of {cap} organizations"
            )),
            Error::Db(e) => ApiError::from(e),
        }
    }
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
    Ok(HttpResponse::Ok().json(memberships::of_org(&state.pool, org_id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    email: String,
    role: String,
}

impl AddMember {
    /// The email and the role; only an owner grants the owner role.
    fn validate(&self, caller_role: Role) -> ApiResult<(Email, Role)> {
        let email = Email::parse(&self.email).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let role = Role::parse(&self.role).ok_or_else(|| {
            ApiError::bad_request("role must be owner, manager, finance, developer or visitor")
        })?;
        if role == Role::Owner && caller_role != Role::Owner {
            return Err(ApiError::forbidden(
                "insufficient role: requires owner to grant the owner role",
            ));
        }
        Ok((email, role))
    }
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
    let (email, role) = body.validate(caller_role)?;

    let mut tx = state.pool.begin().await?;
    crate::org_states::lock_writable(&mut tx, org_id).await?;
    let user_id = crate::users::upsert_by_email(&mut tx, &email).await?;
    memberships::lock_user(&mut tx, user_id).await?;
    let previous = may_set_role(&mut tx, &state, org_id, user_id, role, caller_role).await?;
    if previous != Some(role) {
        memberships::set_role(&mut tx, org_id, user_id, role).await?;
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
                (&caller, Authority::Member(caller_role)),
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
        .json(memberships::Member {
            user_id,
            email: email.as_str().to_owned(),
            role,
        }))
}

/// Whether `user_id` may be given `role` in `org_id` (under the organization's
/// and the user's locks): an owner is changed only by an owner and never the
/// last one; a new membership must fit under the user's cap. Returns the
/// user's current role.
async fn may_set_role(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    org_id: OrgId,
    user_id: UserId,
    role: Role,
    caller_role: Role,
) -> Result<Option<Role>, Error> {
    let roles = OrgRoles::load(&mut *tx, org_id).await?;
    let previous = roles.of(user_id);
    if previous == Some(Role::Owner) && role != Role::Owner {
        roles.may_lose_owner(
            caller_role,
            "insufficient role: requires owner to change an owner",
            "the last owner cannot be demoted",
        )?;
    }
    if previous.is_none() {
        memberships::check_cap(tx, user_id, state.auth.max_memberships_per_user).await?;
    }
    Ok(previous)
}

/// Revoke the keys `user_id` created in `org_id` and audit it as `by`'s
/// (caller's transaction).
async fn revoke_keys(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    by: (&Caller, Authority),
    org_id: OrgId,
    user_id: UserId,
    reason: &str,
) -> ApiResult<Vec<hub_domain::ApiKeyId>> {
    let revoked =
        memberships::revoke_keys_created_by(&mut *tx, &state.naming, org_id, user_id).await?;
    if !revoked.is_empty() {
        let (caller, authority) = by;
        audit::record(
            tx,
            Some(caller.user_id()),
            event_contracts::AuditAction::ApiKeysRevoked,
            &format!("org:{org_id}"),
            audit::by(
                authority,
                json!({"org_id": org_id, "created_by": user_id, "key_ids": revoked, "reason": reason}),
            ),
            &caller.ip,
        )
        .await?;
    }
    Ok(revoked)
}

/// DELETE /v1/organizations/{id}/members/{user_id}, by session: a member
/// leaves (their own id: any role), or an admin removes someone (only an owner
/// removes an owner). The last owner can neither leave nor be removed (409).
/// The keys the member created are revoked in the same transaction. It only
/// takes access away: allowed while the organization is suspended, and to
/// staff in any organization (with an owner's authority over the owner role,
/// audited as staff).
#[tracing::instrument(skip_all)]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, UserId)>,
) -> ApiResult<HttpResponse> {
    let (org_id, user_id) = path.into_inner();
    let leaving = user_id == caller.user_id();
    let cap = if leaving {
        Capability::Read
    } else {
        Capability::Admin
    };
    let authority = caller.require_to_reduce(org_id, cap)?;
    let caller_role = match authority {
        Authority::Member(role) => role,
        Authority::Staff => Role::Owner,
    };
    let mut tx = state.pool.begin().await?;
    memberships::lock_org(&mut tx, org_id).await?;
    let role = may_remove(&mut tx, org_id, user_id, caller_role).await?;
    memberships::remove(&mut tx, org_id, user_id).await?;
    let action = if leaving {
        event_contracts::AuditAction::MemberLeft
    } else {
        event_contracts::AuditAction::MemberRemoved
    };
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        action,
        &format!("org:{org_id}"),
        audit::by(
            authority,
            json!({"org_id": org_id, "user_id": user_id, "previous_role": role}),
        ),
        &caller.ip,
    )
    .await?;
    memberships::announce(&mut tx, &state.naming, org_id, user_id, None).await?;
    revoke_keys(
        &mut tx,
        &state,
        (&caller, authority),
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

/// Whether `user_id` may leave or be removed from `org_id` (under its lock):
/// a member (404 otherwise), an owner only by an owner and never the last
/// one. Returns their role.
async fn may_remove(
    tx: &mut sqlx::PgConnection,
    org_id: OrgId,
    user_id: UserId,
    caller_role: Role,
) -> Result<Role, Error> {
    let roles = OrgRoles::load(tx, org_id).await?;
    let role = roles.of(user_id).ok_or(Error::NotMember)?;
    if role == Role::Owner {
        roles.may_lose_owner(
            caller_role,
            "insufficient role: requires owner to remove an owner",
            "the last owner cannot leave the organization",
        )?;
    }
    Ok(role)
}
