//! Endpoints: developers (and owners, managers) create, rotate and delete;
//! any member lists. The secret is shown once, when created or rotated, and
//! kept sealed. Another organization's endpoint is a 404.

use crate::{
    ssrf,
    state::{secret_aad, AppState},
    store::{self, Endpoint, Error, NewEndpoint},
    worker,
};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, EndpointId, OrgId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::Caller, outbox, ApiError, ApiResult};

impl From<Error> for ApiError {
    #[track_caller]
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound => ApiError::NotFound,
            Error::Db(e) => ApiError::from(e),
        }
    }
}

/// A live endpoint the caller may act on with `cap`; 404 otherwise.
pub async fn authorized(
    state: &AppState,
    caller: &Caller,
    id: EndpointId,
    cap: Capability,
) -> ApiResult<Endpoint> {
    let e = store::live(&state.pool, id).await?;
    caller.require(e.org_id, cap)?;
    Ok(e)
}

/// Who may take an action that only reduces what an endpoint receives
/// (deleting it), on organization `org_id`'s endpoint: a member whose role
/// grants `cap`, even while the organization is suspended (containment must
/// not wait for reactivation); and staff, on any organization. Another
/// organization's endpoint is a 404 to anyone else; too low a role, 403.
fn may_reduce(caller: &Caller, org_id: OrgId, cap: Capability) -> ApiResult<Acting> {
    match caller.identity.membership_in(org_id) {
        Some(m) if m.role.can(cap) => Ok(Acting::Member),
        _ if caller.identity.staff => Ok(Acting::Staff),
        Some(_) => Err(ApiError::forbidden(cap.denied_message())),
        None => Err(ApiError::NotFound),
    }
}

/// In what capacity [`may_reduce`] let the caller act.
#[derive(Clone, Copy, PartialEq)]
enum Acting {
    Member,
    /// Staff acting on an organization (theirs or not) without the role:
    /// the audit event says so.
    Staff,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    org_id: OrgId,
    url: String,
}

/// POST /v1/webhooks (developer or above): 201 `{id, org_id, url, secret, created_at}`;
/// 409 once the organization has `webhooks.max_endpoints_per_org` live endpoints.
#[tracing::instrument(skip_all)]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Json<Create>,
) -> ApiResult<HttpResponse> {
    caller.require(body.org_id, Capability::ManageWebhooks)?;
    let url = ssrf::parse(body.url.trim()).map_err(ApiError::BadRequest)?;
    ssrf::check(&url, state.ssrf)
        .await
        .map_err(ApiError::BadRequest)?;
    let id = EndpointId::new();
    let secret = hub_webhooks::generate_secret().map_err(anyhow::Error::from)?;
    let sealed = state.sealer.seal(secret.as_bytes(), &secret_aad(id))?;
    let mut tx = state.pool.begin().await?;
    // Creations for one organization take turns, so the count is exact under
    // concurrent requests (deletions only lower it).
    store::lock_org(&mut tx, body.org_id).await?;
    let cap = state.webhooks.max_endpoints_per_org;
    if store::live_count(&mut tx, body.org_id).await? >= cap {
        return Err(ApiError::Conflict(format!(
            "this organization already has the maximum of {cap} webhook endpoints; delete one first"
        )));
    }
    let e = store::create(
        &mut tx,
        NewEndpoint {
            id,
            org_id: body.org_id,
            url: url.as_str(),
            sealed_secret: sealed,
            created_by: caller.user_id(),
            at: state.clock.now(),
        },
    )
    .await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::WebhookCreated,
        e.org_id,
        json!({"org_id": e.org_id, "endpoint_id": e.id, "url": e.url}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(json!({
        "id": e.id, "org_id": e.org_id, "url": e.url, "secret": secret,
        "created_at": e.created_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
    })))
}

#[derive(Deserialize)]
pub struct OrgQuery {
    org_id: OrgId,
}

/// GET /v1/webhooks?org_id= (any member, or staff): live endpoints, never a
/// secret (staff find there the endpoints they may delete).
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<OrgQuery>,
) -> ApiResult<HttpResponse> {
    // Staff who are not members read as visitors, audited (the kit's require).
    caller.require(q.org_id, Capability::Read)?;
    Ok(HttpResponse::Ok().json(store::of_org(&state.pool, q.org_id).await?))
}

/// DELETE /v1/webhooks/{id} (developer or above, also while the organization
/// is suspended; staff on any organization): the endpoint is gone and its
/// pending deliveries stop (failed, "endpoint deleted"). Once it answers, no
/// request is sent to the endpoint by any replica: when some of its deliveries
/// were leased (an attempt may be waiting in a replica's memory), it answers
/// [`worker::FENCE_WAIT`] after its commit, past the freshness every attempt
/// needs before it is sent (see `worker::Dispatch::cleared`).
#[tracing::instrument(skip_all, fields(endpoint_id = %path))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<EndpointId>,
) -> ApiResult<HttpResponse> {
    let e = store::live(&state.pool, path.into_inner()).await?;
    let acting = may_reduce(&caller, e.org_id, Capability::ManageWebhooks)?;
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    let leased = store::delete(&mut tx, e.id, now).await?;
    let mut detail = json!({"org_id": e.org_id, "endpoint_id": e.id, "url": e.url});
    if acting == Acting::Staff {
        detail["as"] = json!("staff");
    }
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::WebhookDeleted,
        e.org_id,
        detail,
    )
    .await?;
    state.outbox.commit(tx).await?;
    // This process's attempts waiting for the endpoint stop at once; other
    // replicas' by the time the wait is over.
    worker::tombstone(&state.inflight, e.id);
    if leased {
        tokio::time::sleep(worker::FENCE_WAIT).await;
    }
    Ok(HttpResponse::Ok().json(json!({"status": "deleted"})))
}

/// POST /v1/webhooks/{id}/rotate-secret (developer or above): a new secret,
/// shown here only. For `delivery.rotation_overlap_secs` (24 h) the previous
/// one still signs `webhook-signature` beside it; `X-Service-Sig` uses the new one.
#[tracing::instrument(skip_all, fields(endpoint_id = %path))]
pub async fn rotate(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<EndpointId>,
) -> ApiResult<HttpResponse> {
    let e = authorized(
        &state,
        &caller,
        path.into_inner(),
        Capability::ManageWebhooks,
    )
    .await?;
    let secret = hub_webhooks::generate_secret().map_err(anyhow::Error::from)?;
    let sealed = state.sealer.seal(secret.as_bytes(), &secret_aad(e.id))?;
    let until = state.clock.now() + time::Duration::seconds(state.delivery.rotation_overlap_secs);
    let mut tx = state.pool.begin().await?;
    store::rotate_secret(&mut tx, e.id, sealed, until).await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::WebhookSecretRotated,
        e.org_id,
        json!({"org_id": e.org_id, "endpoint_id": e.id, "url": e.url}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(json!({
        "id": e.id, "secret": secret,
        "previous_valid_until": until.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
    })))
}
