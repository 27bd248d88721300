//! Invitations: an organization's admins invite an email with a role; a
//! session of that email accepts and becomes a member. Rules:
//! proto-docs/accounts.md, "Invites".

use crate::{
    audit,
    invites::{self, Invite, Status},
    memberships,
    ratelimit::{self, Limit},
    state::AppState,
    tokens,
};
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{Capability, Email, InviteId, OrgId, Role};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{Caller, SessionCaller},
    http::identity_changed,
    ApiError, ApiResult,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateInvite {
    email: String,
    role: String,
}

impl CreateInvite {
    /// The email and the role (never owner: an owner is made by an owner, in
    /// person, through the members route).
    fn validate(&self) -> ApiResult<(Email, Role)> {
        let email = Email::parse(&self.email).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let role = Role::parse(&self.role)
            .filter(|r| *r != Role::Owner)
            .ok_or_else(|| {
                ApiError::bad_request("role must be manager, finance, developer or visitor")
            })?;
        Ok((email, role))
    }
}

/// The creation answer: the invite and, here only, its accept URL.
#[derive(Serialize)]
struct Created {
    #[serde(flatten)]
    invite: Invite,
    accept_url: String,
}

/// POST /v1/organizations/{id}/invites: an admin (owner or manager), by
/// session, invites `email` with `role`. 201 with the invite and its
/// `accept_url` (shown only here; mailed when mail is configured). 409: the
/// email is already a member, already has a pending invite, or the
/// organization holds `invites.max_pending_per_org` pending invites.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<CreateInvite>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require_session(org_id, Capability::Admin)?;
    let (email, role) = body.validate()?;
    let token = tokens::generate("inv_")?;

    let mut tx = state.pool.begin().await?;
    // Sent invites count (in this transaction: a refused one does not), and
    // revoking does not give them back: no create-revoke loop mails an
    // address without end.
    let (org_bucket, to_bucket) = (
        format!("invite:org:{org_id}"),
        format!("invite:to:{}", email.as_str()),
    );
    let within = ratelimit::check_and_record(
        &mut tx,
        state.clock.now(),
        &[
            Limit {
                bucket: &org_bucket,
                max: state.invites.per_org_per_hour,
                window_secs: 3600,
            },
            Limit {
                bucket: &to_bucket,
                max: state.invites.per_email_per_hour,
                window_secs: 3600,
            },
        ],
    )
    .await?;
    if !within {
        return Err(ApiError::QuotaExceeded(
            "too many invites: an organization sends at most invites.per_org_per_hour an hour and an address receives at most invites.per_email_per_hour an hour".into(),
        ));
    }
    crate::org_states::lock_writable(&mut tx, org_id).await?;
    if invites::is_member(&mut tx, org_id, &email).await? {
        return Err(ApiError::conflict(
            "this email is already a member of the organization",
        ));
    }
    invites::expire_due(&mut tx, org_id).await?;
    let max = state.invites.max_pending_per_org;
    if invites::pending_count(&mut tx, org_id).await? >= max {
        return Err(ApiError::Conflict(format!(
            "the organization already has the maximum of {max} pending invites"
        )));
    }
    let created = invites::create(
        &mut tx,
        invites::NewInvite {
            org_id,
            email: &email,
            role,
            token_hash: tokens::hash(&token),
            invited_by: caller.user_id(),
            ttl_secs: state.invites.ttl_secs as f64,
        },
    )
    .await?;
    let Some(invite) = created else {
        return Err(ApiError::conflict(
            "this email already has a pending invite to the organization",
        ));
    };
    // The invitee's address is the invite's own data (GET lists it); the
    // audit entry names the invite, never the token or the address.
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        AuditAction::InviteCreated,
        &format!("org:{org_id}"),
        json!({"org_id": org_id, "invite_id": invite.id, "role": role}),
        &caller.ip,
    )
    .await?;
    if let Some(m) = &state.mailer {
        m.enqueue_invite(&mut tx, email.as_str(), &token).await?;
    }
    tx.commit().await?;
    if let Some(m) = &state.mailer {
        m.kick();
    }
    Ok(HttpResponse::Created().json(Created {
        accept_url: crate::mail::link(&state.invites.accept_base_url, &token),
        invite,
    }))
}

/// GET /v1/organizations/{id}/invites: an admin (owner or manager; sessions
/// and keys); every invite, newest first, at most 500, never with a token.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require(org_id, Capability::Admin)?;
    Ok(HttpResponse::Ok().json(invites::of_org(&state.pool, org_id).await?))
}

/// DELETE /v1/organizations/{id}/invites/{invite_id}: an admin, by session,
/// revokes a pending invite: 200 with it (status revoked). Another
/// organization's or an unknown invite: 404; not pending (accepted, revoked,
/// expired): 409. It only takes access away: allowed while the organization
/// is suspended, and to staff in any organization (audited as staff).
#[tracing::instrument(skip_all)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, InviteId)>,
) -> ApiResult<HttpResponse> {
    let (org_id, invite_id) = path.into_inner();
    let authority = caller.require_to_reduce(org_id, Capability::Admin)?;
    let mut tx = state.pool.begin().await?;
    memberships::lock_org(&mut tx, org_id).await?;
    let mut invite = invites::lock(&mut tx, org_id, invite_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    if invite.status != Status::Pending
        || !invites::settle(&mut tx, invite_id, Status::Revoked, None).await?
    {
        return Err(not_pending(invite.status));
    }
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        AuditAction::InviteRevoked,
        &format!("org:{org_id}"),
        audit::by(
            authority,
            json!({"org_id": org_id, "invite_id": invite_id, "role": invite.role}),
        ),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    invite.status = Status::Revoked;
    Ok(HttpResponse::Ok().json(invite))
}

/// The 409 for an invite that is no longer pending.
fn not_pending(status: Status) -> ApiError {
    ApiError::Conflict(format!(
        "the invite is {}, no longer pending",
        status.as_str()
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptBody {
    token: String,
}

/// The membership an accept made, with the invite as it is now.
#[derive(Serialize)]
struct Accepted {
    org_id: OrgId,
    role: Role,
    invite: Invite,
}

/// POST /v1/invites/accept: a session whose email is the invite's accepts it
/// and becomes a member with its role, in one transaction; 200 with the
/// membership. Unknown token: 404; another email's session: 403; accepted,
/// revoked or expired: 409; already a member, or at the membership cap: 409.
/// The organization's lock, then the invite's row lock, serialize concurrent
/// accepts: one 200, the others 409.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn accept(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<AcceptBody>,
) -> ApiResult<HttpResponse> {
    if body.token.is_empty() || body.token.len() > tokens::MAX_TOKEN_LEN {
        return Err(ApiError::NotFound);
    }
    let hash = tokens::hash(&body.token);
    let user_id = caller.user_id();
    let mut tx = state.pool.begin().await?;
    let org_id = invites::org_of_token(&mut tx, &hash)
        .await?
        .ok_or(ApiError::NotFound)?;
    memberships::lock_org(&mut tx, org_id).await?;
    let mut invite = invites::lock_by_token(&mut tx, &hash)
        .await?
        .ok_or(ApiError::NotFound)?;
    if invite.email != caller.identity.email {
        return Err(ApiError::forbidden(
            "this invite is for another email address",
        ));
    }
    if invite.status != Status::Pending {
        return Err(not_pending(invite.status));
    }
    // Joining is a write in the organization: refused while it is suspended
    // (the invite stays pending for after the reactivation) or closed.
    crate::org_states::refuse_unless_active(&mut tx, org_id).await?;
    memberships::lock_user(&mut tx, user_id).await?;
    let roles = memberships::OrgRoles::load(&mut tx, org_id).await?;
    if roles.of(user_id).is_some() {
        return Err(ApiError::conflict(
            "you are already a member of this organization",
        ));
    }
    memberships::check_cap(&mut tx, user_id, state.auth.max_memberships_per_user).await?;
    if !invites::settle(&mut tx, invite.id, Status::Accepted, Some(user_id)).await? {
        return Err(not_pending(Status::Expired));
    }
    memberships::set_role(&mut tx, org_id, user_id, invite.role).await?;
    audit::record(
        &mut tx,
        Some(user_id),
        AuditAction::InviteAccepted,
        &format!("org:{org_id}"),
        json!({"org_id": org_id, "invite_id": invite.id, "user_id": user_id,
               "role": invite.role}),
        &caller.ip,
    )
    .await?;
    // The same announcement as a member add: the gateways drop the user's
    // cached identity, org-billing's replica learns the membership.
    memberships::announce(&mut tx, &state.naming, org_id, user_id, Some(invite.role)).await?;
    tx.commit().await?;
    state.publish_now().await;
    invite.status = Status::Accepted;
    Ok(HttpResponse::Ok()
        .insert_header(identity_changed(user_id))
        .json(Accepted {
            org_id,
            role: invite.role,
            invite,
        }))
}
