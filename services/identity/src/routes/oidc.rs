//! The OpenID Provider's public documents (no credentials): discovery
//! (`GET /.well-known/openid-configuration`, OpenID Connect Discovery 1.0 and
//! RFC 8414) and the signing keys (`GET /.well-known/jwks.json`).

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

/// GET /.well-known/openid-configuration: where everything is and what the
/// provider supports. Every URL is under `oidc.issuer`.
#[tracing::instrument(skip_all)]
pub async fn discovery(state: web::Data<AppState>) -> HttpResponse {
    let iss = state.oidc.issuer.as_str();
    HttpResponse::Ok()
        .insert_header(("cache-control", "public, max-age=3600"))
        .json(json!({
            "issuer": iss,
            "authorization_endpoint": format!("{iss}/oauth/authorize"),
            "token_endpoint": format!("{iss}/oauth/token"),
            "userinfo_endpoint": format!("{iss}/oauth/userinfo"),
            "jwks_uri": format!("{iss}/.well-known/jwks.json"),
            "introspection_endpoint": format!("{iss}/oauth/introspect"),
            "revocation_endpoint": format!("{iss}/oauth/revoke"),
            "end_session_endpoint": format!("{iss}/oauth/logout"),
            "scopes_supported": crate::oauth_clients::SCOPES,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials",
                                      "urn:ietf:params:oauth:grant-type:device_code"],
            "device_authorization_endpoint": format!("{iss}/oauth/device_authorization"),
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "code_challenge_methods_supported": ["S256"],
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "acr", "amr", "sid", "at_hash", "azp", "email", "email_verified", "name", "orgs", "staff"],
            "acr_values_supported": ["urn:hub:acr:link", "urn:hub:acr:mfa"],
            "authorization_response_iss_parameter_supported": true,
            "request_parameter_supported": false,
            "request_uri_parameter_supported": false,
            "claims_parameter_supported": false,
        }))
}
