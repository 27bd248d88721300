//! Org-scoped API keys: admin authority, by session, to create, list and
//! revoke (a leaked key cannot mint more keys). A key remembers who created it;
//! when that member loses admin authority or leaves, their keys are revoked.

use crate::{audit, resolve::API_KEY_PREFIX, state::AppState, tokens};
use actix_web::{web, HttpResponse};
use event_contracts::CredentialRevoked;
use hub_domain::{ApiKeyId, Capability, OrgId, Role, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{assertion::Caller, outbox, ApiError, ApiResult};
use time::OffsetDateTime;

pub const NAME_MAX: usize = 100;

#[derive(Serialize)]
struct ApiKey {
    id: ApiKeyId,
    name: String,
    role: String,
    /// The user who created the key (it is revoked when they lose admin authority).
    created_by: hub_domain::UserId,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    revoked_at: Option<OffsetDateTime>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    name: String,
    role: Option<String>,
}

/// POST /v1/organizations/{id}/api-keys: 201 `{key, token}`; the plaintext is
/// returned only here, only its SHA-256 is kept.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<CreateKey>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require_session(org_id, Capability::Admin)?;
    let name = crate::fields::line("name", &body.name, NAME_MAX)?;
    if name.is_empty() {
        return Err(ApiError::bad_request("name is required"));
    }
    let role = match body.role.as_deref() {
        None => Role::Developer,
        Some(r) => Role::parse(r).ok_or_else(|| {
            ApiError::bad_request("role must be manager, finance, developer or visitor")
        })?,
    };
    if !role.allowed_for_api_key() {
        return Err(ApiError::bad_request("API keys never carry the owner role"));
    }
    let token = tokens::generate(API_KEY_PREFIX)?;
    let mut tx = state.pool.begin().await?;
    let key: ApiKey = sqlx::query_as!(
        ApiKey,
        "INSERT INTO api_keys (id, org_id, name, role, token_hash, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, name, role, created_by, created_at, revoked_at",
        ApiKeyId::new() as ApiKeyId,
        org_id as OrgId,
        &name,
        role.as_str(),
        tokens::hash(&token),
        caller.user_id() as UserId,
    )
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        event_contracts::AuditAction::ApiKeyCreated,
        &format!("org:{org_id}"),
        json!({"org_id": org_id, "key_id": key.id, "name": name, "role": role}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(json!({ "key": key, "token": token })))
}

/// GET /v1/organizations/{id}/api-keys: every key, newest first, never a token.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org_id = path.into_inner();
    caller.require_session(org_id, Capability::Admin)?;
    let keys: Vec<ApiKey> = sqlx::query_as!(
        ApiKey,
        "SELECT id, name, role, created_by, created_at, revoked_at FROM api_keys \
         WHERE org_id = $1 ORDER BY created_at DESC LIMIT 500",
        org_id as OrgId,
    )
    .fetch_all(&state.pool)
    .await?;
    Ok(HttpResponse::Ok().json(keys))
}

/// DELETE /v1/organizations/{id}/api-keys/{key_id}: revoke at once on every
/// gateway; 404 when unknown, another organization's, or already revoked.
#[tracing::instrument(skip_all)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, ApiKeyId)>,
) -> ApiResult<HttpResponse> {
    let (org_id, key_id) = path.into_inner();
    caller.require_session(org_id, Capability::Admin)?;
    let mut tx = state.pool.begin().await?;
    let hash: Option<Vec<u8>> = sqlx::query_scalar!(
        "UPDATE api_keys SET revoked_at = now() \
         WHERE id = $1 AND org_id = $2 AND revoked_at IS NULL RETURNING token_hash",
        key_id as ApiKeyId,
        org_id as OrgId,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let hash = hash.ok_or(ApiError::NotFound)?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        event_contracts::AuditAction::ApiKeyRevoked,
        &format!("org:{org_id}"),
        json!({"org_id": org_id, "key_id": key_id}),
        &caller.ip,
    )
    .await?;
    outbox::enqueue(
        &mut tx,
        &state.naming,
        CredentialRevoked {
            user_id: key_id.as_principal(),
            credential_kind: "api_key".into(),
            credential_id: key_id.as_uuid(),
            token_hash: hex::encode(hash),
        },
    )
    .await?;
    tx.commit().await?;
    state.publish_now().await;
    // The key is its own principal: drop its cached identity.
    Ok(HttpResponse::Ok()
        .insert_header(service_kit::http::identity_changed(key_id.as_principal()))
        .json(json!({"status": "revoked"})))
}
