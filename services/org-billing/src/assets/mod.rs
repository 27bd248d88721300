//! Organization assets: the documents, logos and links an organization
//! keeps, by https URL (the files live elsewhere; nothing here fetches them).
//! Members read, the admin roles (owner, manager) write; OrganizationDetail's
//! `assets` counts them. The SQL is in [`store`].

mod model;
pub mod store;

pub use model::Kind;

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::{AssetId, Capability, OrgId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{assertion::Caller, http::Object, outbox, ApiError, ApiResult};

pub const NAME_MAX: usize = 200;
pub const NOTE_MAX: usize = 1000;
pub const URL_MAX: usize = 2048;

/// GET /v1/organizations/{id}/assets (any member): all of them (at most
/// `orgs.max_assets`), oldest first.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    caller.require(org, Capability::Read)?;
    Ok(HttpResponse::Ok().json(store::of_org(&state.pool, org).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewAsset {
    kind: String,
    name: String,
    url: String,
    #[serde(default)]
    note: String,
}

/// POST /v1/organizations/{id}/assets (owner, manager): 201 OrgAsset; 409
/// past `orgs.max_assets`.
#[tracing::instrument(skip_all, fields(org_id = %path))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<OrgId>,
    body: web::Json<NewAsset>,
) -> ApiResult<HttpResponse> {
    let org = path.into_inner();
    caller.require(org, Capability::Admin)?;
    let new = store::NewAsset {
        kind: kind(&body.kind)?,
        name: crate::billing::text("name", &body.name, NAME_MAX, true)?,
        url: https_url(&body.url)?,
        note: crate::billing::text("note", &body.note, NOTE_MAX, false)?,
    };
    let mut tx = state.pool.begin().await?;
    crate::orgs::store::lock_writable(&mut tx, org).await?;
    let max = state.orgs.max_assets;
    if store::count_locked(&mut tx, org).await? >= max {
        return Err(ApiError::Conflict(format!(
            "an organization holds at most {max} assets"
        )));
    }
    let a = store::insert(&mut tx, AssetId::new(), org, &new).await?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::AssetCreated,
        org,
        json!({"asset_id": a.id, "kind": a.kind}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Created().json(a))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetPatch {
    kind: Option<String>,
    name: Option<String>,
    url: Option<String>,
    note: Option<String>,
}

/// PATCH /v1/organizations/{id}/assets/{asset_id} (owner, manager): any of
/// `kind`, `name`, `url`, `note` (absent or null: unchanged); 200 the asset
/// as it is now.
#[tracing::instrument(skip_all, fields(org_id = %path.0))]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, AssetId)>,
    body: web::Json<Object<AssetPatch>>,
) -> ApiResult<HttpResponse> {
    let (org, id) = path.into_inner();
    caller.require(org, Capability::Admin)?;
    let b = body.into_inner().0;
    let patch = store::AssetPatch {
        kind: b.kind.as_deref().map(kind).transpose()?,
        name: b
            .name
            .as_deref()
            .map(|n| crate::billing::text("name", n, NAME_MAX, true))
            .transpose()?,
        url: b.url.as_deref().map(https_url).transpose()?,
        note: b
            .note
            .as_deref()
            .map(|n| crate::billing::text("note", n, NOTE_MAX, false))
            .transpose()?,
    };
    let fields = patch.fields();
    let mut tx = state.pool.begin().await?;
    crate::orgs::store::lock_writable(&mut tx, org).await?;
    if fields.is_empty() {
        // A patch that names nothing changes nothing (merge-patch semantics).
        let a = store::one(&mut tx, org, id)
            .await?
            .ok_or(ApiError::NotFound)?;
        return Ok(HttpResponse::Ok().json(a));
    }
    let a = store::update(&mut tx, org, id, &patch)
        .await?
        .ok_or(ApiError::NotFound)?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::AssetUpdated,
        org,
        json!({"asset_id": id, "fields": fields}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(a))
}

/// DELETE /v1/organizations/{id}/assets/{asset_id} (owner, manager): 200
/// with the asset as it was.
#[tracing::instrument(skip_all, fields(org_id = %path.0))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(OrgId, AssetId)>,
) -> ApiResult<HttpResponse> {
    let (org, id) = path.into_inner();
    caller.require(org, Capability::Admin)?;
    let mut tx = state.pool.begin().await?;
    crate::orgs::store::lock_writable(&mut tx, org).await?;
    let a = store::delete(&mut tx, org, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    outbox::audit(
        &mut tx,
        &state.naming,
        &caller,
        AuditAction::AssetDeleted,
        org,
        json!({"asset_id": id}),
    )
    .await?;
    state.outbox.commit(tx).await?;
    Ok(HttpResponse::Ok().json(a))
}

fn kind(s: &str) -> ApiResult<Kind> {
    Kind::parse(s)
        .ok_or_else(|| ApiError::bad_request("kind must be document, logo, link or other"))
}

/// An absolute https URL with a host and no credentials, at most
/// [`URL_MAX`] characters (trimmed), in its normal form (host lower-cased,
/// characters outside URLs percent-encoded), so what is stored and answered
/// is always a valid URL.
fn https_url(s: &str) -> ApiResult<String> {
    let s = s.trim();
    let bad = || {
        ApiError::BadRequest(format!("url must be an https URL of at most {URL_MAX} characters, with a host and without credentials"))
    };
    if s.len() > URL_MAX || !s.starts_with("https://") {
        return Err(bad());
    }
    let u = url::Url::parse(s).map_err(|_| bad())?;
    if u.scheme() != "https"
        || u.host_str().is_none_or(str::is_empty)
        || !u.username().is_empty()
        || u.password().is_some()
    {
        return Err(bad());
    }
    let normal = u.to_string();
    if normal.len() > URL_MAX {
        return Err(bad());
    }
    Ok(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_urls_with_a_host_and_no_credentials() {
        for ok in [
            "https://example.com/logo.png",
            "https://a.b/c?d=e#f",
            " https://x.io ",
        ] {
            assert!(https_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.com/",
            "ftp://example.com/",
            "javascript:alert(1)",
            "https://",
            "https://user:pw@example.com/",
            "https://user@example.com/",
            "example.com",
            "",
        ] {
            assert!(https_url(bad).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(URL_MAX));
        assert!(https_url(&long).is_err());
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in ["document", "logo", "link", "other"] {
            assert_eq!(kind(k).map(Kind::as_str).ok(), Some(k));
        }
        assert!(kind("Logo").is_err());
    }
}
