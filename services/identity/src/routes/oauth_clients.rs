//! OAuth clients of the OpenID Provider (staff): `POST` and `GET
//! /v1/admin/oauth-clients`, `PATCH` and `DELETE /v1/admin/oauth-clients/{id}`.
//! A confidential client's secret is generated here and shown once (in the
//! answer that made or replaced it); only its SHA-256 is kept. Every change
//! is audited in the staff member's history, without the secret.

use crate::{audit, oauth_clients as clients, state::AppState, tokens};
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::OrgId;
use serde::Deserialize;
use serde_json::{json, Value};
use service_kit::{assertion::StaffCaller, ApiError, ApiResult};
use uuid::Uuid;

/// The prefix of client secrets (recognizable in a leak scanner).
const SECRET_PREFIX: &str = "hub_cs_";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewClient {
    name: String,
    /// `public` or `confidential`.
    kind: String,
    #[serde(default)]
    first_party: bool,
    redirect_uris: Vec<String>,
    #[serde(default)]
    post_logout_redirect_uris: Vec<String>,
    scopes: Vec<String>,
    #[serde(default)]
    allowed_org_ids: Vec<OrgId>,
}

/// POST /v1/admin/oauth-clients (staff): 201 the client, with
/// `client_secret` once for a confidential one.
#[tracing::instrument(skip_all)]
pub async fn create(
    state: web::Data<AppState>,
    staff: StaffCaller,
    body: web::Json<NewClient>,
) -> ApiResult<HttpResponse> {
    let b = body.into_inner();
    let confidential = match b.kind.as_str() {
        "confidential" => true,
        "public" => false,
        other => {
            return Err(ApiError::BadRequest(format!(
                "kind must be public or confidential (not {other:?})"
            )))
        }
    };
    let new = clients::New {
        name: clients::name(&b.name)?,
        confidential,
        first_party: b.first_party,
        redirect_uris: clients::redirect_uris("redirect_uris", &b.redirect_uris, 1)?,
        post_logout_redirect_uris: clients::redirect_uris(
            "post_logout_redirect_uris",
            &b.post_logout_redirect_uris,
            0,
        )?,
        scopes: clients::scopes(&b.scopes)?,
        allowed_org_ids: clients::orgs(&b.allowed_org_ids)?,
    };
    let secret = confidential
        .then(|| tokens::generate(SECRET_PREFIX))
        .transpose()
        .map_err(ApiError::internal)?;
    let mut tx = state.pool.begin().await?;
    let client = clients::insert(
        &mut tx,
        &new,
        secret.as_deref().map(tokens::hash),
        staff.user_id(),
    )
    .await?;
    audit::record(
        &mut tx,
        Some(staff.user_id()),
        AuditAction::OAuthClientCreated,
        &format!("oauth_client:{}", client.id),
        json!({"client_id": client.id, "name": client.name, "kind": client.kind}),
        &staff.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(with_secret(&client, secret)))
}

/// The client as JSON, with `client_secret` when one was just made.
fn with_secret(client: &clients::Client, secret: Option<String>) -> Value {
    let mut v = serde_json::to_value(client).unwrap_or_default();
    if let (Some(s), Some(o)) = (secret, v.as_object_mut()) {
        o.insert("client_secret".into(), Value::String(s));
    }
    v
}

/// GET /v1/admin/oauth-clients (staff): every client, newest first.
#[tracing::instrument(skip_all)]
pub async fn list(state: web::Data<AppState>, _staff: StaffCaller) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(clients::list(&state.pool).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientChange {
    name: Option<String>,
    first_party: Option<bool>,
    redirect_uris: Option<Vec<String>>,
    post_logout_redirect_uris: Option<Vec<String>>,
    scopes: Option<Vec<String>>,
    allowed_org_ids: Option<Vec<OrgId>>,
    /// Replace a confidential client's secret (the new one is in the answer).
    #[serde(default)]
    rotate_secret: bool,
}

/// PATCH /v1/admin/oauth-clients/{id} (staff): 200 the client (with the new
/// `client_secret` after `rotate_secret`); 404 unknown; 409 retired.
#[tracing::instrument(skip_all)]
pub async fn update(
    state: web::Data<AppState>,
    staff: StaffCaller,
    path: web::Path<Uuid>,
    body: web::Json<ClientChange>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let b = body.into_inner();
    let mut tx = state.pool.begin().await?;
    let mut c = clients::lock(&mut tx, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    if c.retired_at.is_some() {
        return Err(ApiError::Conflict("the client is retired".into()));
    }
    let mut fields: Vec<&str> = Vec::new();
    if let Some(n) = b.name {
        c.name = clients::name(&n)?;
        fields.push("name");
    }
    if let Some(f) = b.first_party {
        c.first_party = f;
        fields.push("first_party");
    }
    if let Some(r) = b.redirect_uris {
        c.redirect_uris = clients::redirect_uris("redirect_uris", &r, 1)?;
        fields.push("redirect_uris");
    }
    if let Some(r) = b.post_logout_redirect_uris {
        c.post_logout_redirect_uris = clients::redirect_uris("post_logout_redirect_uris", &r, 0)?;
        fields.push("post_logout_redirect_uris");
    }
    if let Some(s) = b.scopes {
        c.scopes = clients::scopes(&s)?;
        fields.push("scopes");
    }
    if let Some(o) = b.allowed_org_ids {
        c.allowed_org_ids = clients::orgs(&o)?;
        fields.push("allowed_org_ids");
    }
    let secret = if b.rotate_secret {
        if c.kind != "confidential" {
            return Err(ApiError::bad_request("a public client has no secret"));
        }
        fields.push("secret");
        Some(tokens::generate(SECRET_PREFIX).map_err(ApiError::internal)?)
    } else {
        None
    };
    if fields.is_empty() {
        return Err(ApiError::bad_request("nothing to change"));
    }
    let c = clients::update(&mut tx, &c, secret.as_deref().map(tokens::hash)).await?;
    audit::record(
        &mut tx,
        Some(staff.user_id()),
        AuditAction::OAuthClientUpdated,
        &format!("oauth_client:{id}"),
        json!({"client_id": id, "fields": fields}),
        &staff.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(with_secret(&c, secret)))
}

/// DELETE /v1/admin/oauth-clients/{id} (staff): retire the client (204); 404
/// unknown or already retired.
#[tracing::instrument(skip_all)]
pub async fn retire(
    state: web::Data<AppState>,
    staff: StaffCaller,
    path: web::Path<Uuid>,
) -> ApiResult<HttpResponse> {
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    match clients::lock(&mut tx, id).await? {
        Some(c) if c.retired_at.is_none() => {}
        _ => return Err(ApiError::NotFound),
    }
    clients::retire(&mut tx, id).await?;
    audit::record(
        &mut tx,
        Some(staff.user_id()),
        AuditAction::OAuthClientRetired,
        &format!("oauth_client:{id}"),
        json!({"client_id": id}),
        &staff.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}
