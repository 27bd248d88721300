//! Endpoints: developers (and owners, managers) create, rotate and delete;
//! any member lists. The secret is shown once, when created or rotated, and
//! kept sealed. Another organization's endpoint is a 404.

use crate::{
    ssrf,
    state::{secret_aad, AppState},
};
use actix_web::{web, HttpResponse};
use hub_domain::{Capability, EndpointId, OrgId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, outbox, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Serialize)]
pub struct Endpoint {
    pub id: Uuid,
    pub org_id: OrgId,
    pub url: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// A live endpoint the caller may act on with `cap`; 404 otherwise.
pub async fn authorized(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    cap: Capability,
) -> ApiResult<Endpoint> {
    let e = sqlx::query_as!(
        Endpoint,
        r#"SELECT id, org_id AS "org_id: OrgId", url, created_at FROM endpoints
            WHERE id = $1 AND deleted_at IS NULL"#,
        id,
    )
    .fetch_optional(&state.pool)
    .await?
    .ok_or(ApiError::NotFound)?;
    caller.require(e.org_id, cap)?;
    Ok(e)
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
    let id = Uuid::now_v7();
    let secret = hub_webhooks::generate_secret().map_err(anyhow::Error::from)?;
    let sealed = state.sealer.seal(secret.as_bytes(), &secret_aad(id))?;
    let mut tx = state.pool.begin().await?;
    // Creations for one organization take turns, so the count is exact under
    // concurrent requests (deletions only lower it).
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        format!("webhook-endpoints:{}", body.org_id),
    )
    .execute(&mut *tx)
    .await?;
    let live = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM endpoints WHERE org_id = $1 AND deleted_at IS NULL"#,
        body.org_id as OrgId,
    )
    .fetch_one(&mut *tx)
    .await?;
    let cap = state.webhooks.max_endpoints_per_org;
    if live >= cap {
        return Err(ApiError::Conflict(format!(
            "this organization already has the maximum of {cap} webhook endpoints; delete one first"
        )));
    }
    let e = sqlx::query_as!(
        Endpoint,
        r#"INSERT INTO endpoints (id, org_id, url, secret, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6)
           RETURNING id, org_id AS "org_id: OrgId", url, created_at"#,
        id,
        body.org_id as OrgId,
        url.as_str(),
        sealed,
        caller.user_id() as UserId,
        state.clock.now(),
    )
    .fetch_one(&mut *tx)
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

/// GET /v1/webhooks?org_id= (any member): live endpoints, never a secret.
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    q: web::Query<OrgQuery>,
) -> ApiResult<HttpResponse> {
    caller.require(q.org_id, Capability::Read)?;
    let es = sqlx::query_as!(
        Endpoint,
        r#"SELECT id, org_id AS "org_id: OrgId", url, created_at FROM endpoints
            WHERE org_id = $1 AND deleted_at IS NULL
            ORDER BY created_at, id LIMIT 500"#,
        q.org_id as OrgId,
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(es))
}

/// DELETE /v1/webhooks/{id} (developer or above): the endpoint is gone and its
/// pending deliveries stop (failed, "endpoint deleted").
#[tracing::instrument(skip_all, fields(endpoint_id = %path))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<EndpointId>,
) -> ApiResult<HttpResponse> {
    let e = authorized(
        &state,
        &caller,
        path.into_inner().as_uuid(),
        Capability::ManageWebhooks,
    )
    .await?;
    let now = state.clock.now();
    let mut tx = state.pool.begin().await?;
    let gone = sqlx::query!(
        "UPDATE endpoints SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL",
        e.id,
        now,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if gone == 0 {
        return Err(ApiError::NotFound);
    }
    sqlx::query!(
        "UPDATE deliveries SET status = 'failed', last_error = 'endpoint deleted', updated_at = $2 \
         WHERE endpoint_id = $1 AND status = 'pending'",
        e.id,
        now,
    )
    .execute(&mut *tx)
    .await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        event_contracts::AuditAction::WebhookDeleted,
        e.org_id,
        json!({"org_id": e.org_id, "endpoint_id": e.id, "url": e.url}),
    )
    .await?;
    state.outbox.commit(tx).await?;
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
        path.into_inner().as_uuid(),
        Capability::ManageWebhooks,
    )
    .await?;
    let secret = hub_webhooks::generate_secret().map_err(anyhow::Error::from)?;
    let sealed = state.sealer.seal(secret.as_bytes(), &secret_aad(e.id))?;
    let until = state.clock.now() + time::Duration::seconds(state.delivery.rotation_overlap_secs);
    let mut tx = state.pool.begin().await?;
    sqlx::query!(
        "UPDATE endpoints SET previous_secret = secret, previous_until = $3, secret = $2 WHERE id = $1",
        e.id,
        sealed,
        until,
    )
    .execute(&mut *tx)
    .await?;
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
