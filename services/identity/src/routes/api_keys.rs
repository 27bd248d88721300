//! Org-scoped API keys: admin authority, by session, to create, list and
//! revoke (a leaked key cannot mint more keys). A key remembers who created it;
//! when that member loses admin authority or leaves, their keys are revoked.

use crate::{
    api_keys::{self as keys, NewKey},
    audit,
    resolve::API_KEY_PREFIX,
    state::AppState,
    tokens,
};
use actix_web::{web, HttpResponse};
use hub_domain::{ApiKeyId, Capability, OrgId, Role};
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::Caller, ApiError, ApiResult};

pub const NAME_MAX: usize = 100;

impl From<keys::Error> for ApiError {
    #[track_caller]
    fn from(e: keys::Error) -> Self {
        match e {
            keys::Error::NotFound => ApiError::NotFound,
            keys::Error::Db(e) => ApiError::from(e),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    name: String,
    role: Option<String>,
}

impl CreateKey {
    /// The trimmed name (required) and the role (developer when absent, never owner).
    fn validate(&self) -> ApiResult<(String, Role)> {
        let name = crate::fields::line("name", &self.name, NAME_MAX)?;
        if name.is_empty() {
            return Err(ApiError::bad_request("name is required"));
        }
        let role = match self.role.as_deref() {
            None => Role::Developer,
            Some(r) => Role::parse(r).ok_or_else(|| {
                ApiError::bad_request("role must be manager, finance, developer or visitor")
            })?,
        };
        if !role.allowed_for_api_key() {
            return Err(ApiError::bad_request("API keys never carry the owner role"));
        }
        Ok((name, role))
    }
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
    let (name, role) = body.validate()?;
    let token = tokens::generate(API_KEY_PREFIX)?;
    let mut tx = state.pool.begin().await?;
    crate::org_states::lock_writable(&mut tx, org_id).await?;
    let key = keys::create(
        &mut tx,
        NewKey {
            org_id,
            name: &name,
            role,
            token_hash: tokens::hash(&token),
            created_by: caller.user_id(),
        },
    )
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
    Ok(HttpResponse::Ok().json(keys::of_org(&state.pool, org_id).await?))
}

/// DELETE /v1/organizations/{id}/api-keys/{key_id}: revoke at once on every
/// gateway; 404 when unknown, another organization's, or already revoked.
/// It only takes access away: allowed while the organization is suspended,
/// and to staff in any organization (audited as staff).
#[tracing::instrument(skip_all)]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, ApiKeyId)>,
) -> ApiResult<HttpResponse> {
    let (org_id, key_id) = path.into_inner();
    let authority = caller.require_to_reduce(org_id, Capability::Admin)?;
    let mut tx = state.pool.begin().await?;
    let hash = keys::revoke(&mut tx, org_id, key_id).await?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        event_contracts::AuditAction::ApiKeyRevoked,
        &format!("org:{org_id}"),
        audit::by(authority, json!({"org_id": org_id, "key_id": key_id})),
        &caller.ip,
    )
    .await?;
    crate::api_keys::enqueue_revoked(&mut tx, &state.naming, &[(key_id, hash)]).await?;
    tx.commit().await?;
    state.publish_now().await;
    // The key is its own principal: drop its cached identity.
    Ok(HttpResponse::Ok()
        .insert_header(service_kit::http::identity_changed(key_id.as_principal()))
        .json(json!({"status": "revoked"})))
}
