//! Suspension (staff): a suspended organization reads normally, but every
//! write of its members and keys answers 403 naming the suspension, in every
//! service. org-billing owns the status; `core.v1.org.status_changed` (with a
//! version that grows with each change) carries it to identity, which puts it
//! in the memberships the gateway forwards and tells the gateways to drop
//! their cached identities of the organization's members. The change is
//! answered once identity applied it too (a synchronous internal call, the
//! event staying the backstop), and org-billing's own writes read the status
//! in their transactions ([`store::lock_writable`]): once staff hear 200, the
//! organization's writes in org-billing and identity are refused.

use super::store;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::{AuditAction, OrgStatusChanged};
use hub_domain::{OrgId, OrgStatus};
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::StaffCaller, outbox, ApiError, ApiResult};

pub const REASON_MAX: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suspension {
    reason: String,
}

/// POST /v1/admin/organizations/{id}/suspend (staff; `reason`): 200 the
/// organization as it is now; 409 when already suspended.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn suspend(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
    body: web::Json<Suspension>,
) -> ApiResult<HttpResponse> {
    let reason = crate::billing::text("reason", &body.reason, REASON_MAX, true)?;
    change(
        &state,
        &caller,
        path.into_inner(),
        OrgStatus::Suspended,
        Some(&reason),
    )
    .await
}

/// POST /v1/admin/organizations/{id}/reactivate (staff): 200 the organization
/// as it is now; 409 when it is not suspended.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn reactivate(
    caller: StaffCaller,
    state: web::Data<AppState>,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    change(&state, &caller, path.into_inner(), OrgStatus::Active, None).await
}

async fn change(
    state: &AppState,
    caller: &StaffCaller,
    org_id: OrgId,
    to: OrgStatus,
    reason: Option<&str>,
) -> ApiResult<HttpResponse> {
    let mut tx = state.pool.begin().await?;
    let Some(version) = store::set_status(&mut tx, org_id, to, reason).await? else {
        store::require(&mut tx, org_id).await?;
        if store::with_status(&mut tx, org_id).await?.status == OrgStatus::Closed {
            return Err(ApiError::Conflict(
                "the organization is closed, for good: it is neither suspended nor reactivated"
                    .into(),
            ));
        }
        return Err(ApiError::Conflict(format!(
            "the organization is already {}",
            to.as_str()
        )));
    };
    outbox::enqueue(
        &mut tx,
        &state.naming,
        OrgStatusChanged {
            org_id,
            status: to,
            version,
        },
    )
    .await?;
    let action = match to {
        OrgStatus::Suspended => AuditAction::OrgSuspended,
        OrgStatus::Active => AuditAction::OrgReactivated,
        OrgStatus::Closed => AuditAction::OrgClosed,
    };
    // The reason stays on the organization (staff read it here), out of audit.
    outbox::audit(
        &mut tx,
        &state.naming,
        caller,
        action,
        org_id,
        json!({"org_id": org_id}),
    )
    .await?;
    let now = store::with_status(&mut tx, org_id).await?;
    state.outbox.commit(tx).await?;
    // Read-your-writes: 200 only once identity has the status too (org-billing's
    // own writes read it from its table, in their transactions).
    if let Err(e) = state.tell_identity_status(org_id, to, version).await {
        tracing::error!(error = %e, %org_id, status = to.as_str(), "status change not confirmed by identity");
        return Err(ApiError::Unavailable(format!(
            "the organization is now {}, but identity did not confirm it yet: its members' \
             writes outside org-billing follow once it has (the change is kept and still \
             delivered; read the organization to check)",
            to.as_str()
        )));
    }
    Ok(HttpResponse::Ok().json(now))
}
