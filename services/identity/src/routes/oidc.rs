//! The OpenID Provider's public documents (no credentials): the signing keys
//! (`GET /.well-known/jwks.json`). Discovery, the authorization and token
//! endpoints follow (issue 37).

use crate::{oidc_keys, state::AppState};
use actix_web::{web, HttpResponse};
use serde_json::json;
use service_kit::{ApiError, ApiResult};

/// How long relying parties may cache the key set: well under
/// `oidc.key_prepublish_secs`, so a new key is seen before it signs.
const JWKS_MAX_AGE_SECS: u32 = 300;

/// GET /.well-known/jwks.json: the published public keys (RFC 7517).
#[tracing::instrument(skip_all)]
pub async fn jwks(state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    if state.sealer.is_none() {
        return Err(ApiError::Unavailable(
            "the OpenID Provider is not configured (identity has no sealing.keys)".into(),
        ));
    }
    let keys = oidc_keys::published(&state.pool, state.clock.now())
        .await
        .map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok()
        .content_type("application/jwk-set+json")
        .insert_header((
            "cache-control",
            format!("public, max-age={JWKS_MAX_AGE_SECS}"),
        ))
        .json(json!({ "keys": keys })))
}
