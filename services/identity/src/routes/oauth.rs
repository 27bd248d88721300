//! The OpenID Provider's token endpoint, `POST /oauth/token` (RFC 6749 3.2).
//! So far the client credentials grant (4.4): a confidential client's back
//! end gets an access token of its own (RFC 9068 JWT, ES256, the current
//! signing key), with no user in it. Errors are RFC 6749 5.2's
//! (`{"error": code, "error_description"}`), never cached.

use crate::{oauth_clients as clients, oidc_keys, state::AppState, tokens};
use actix_web::{http::header, web, HttpRequest, HttpResponse};
use base64::{engine::general_purpose::STANDARD, Engine};
use ring::{hmac, rand::SystemRandom};
use serde_json::json;
use service_kit::{ApiError, ApiResult};
use std::collections::HashMap;
use uuid::Uuid;

/// Longest request body, in bytes.
const BODY_MAX: usize = 4096;

/// An RFC 6749 5.2 error.
fn oauth_error(status: u16, code: &str, description: &str) -> HttpResponse {
    let mut r = HttpResponse::build(
        actix_web::http::StatusCode::from_u16(status)
            .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST),
    );
    r.insert_header(("cache-control", "no-store"));
    if status == 401 {
        r.insert_header(("www-authenticate", "Basic realm=\"hub\""));
    }
    r.json(json!({"error": code, "error_description": description}))
}

/// An RFC 6749 refusal before it is a response: status, code, description.
struct Refusal(u16, &'static str, &'static str);

/// Whether two secret hashes are equal, in constant time (ring's HMAC verify).
fn same_hash(a: &[u8], b: &[u8]) -> bool {
    let Ok(key) = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new()) else {
        return false;
    };
    let tag = hmac::sign(&key, a);
    hmac::verify(&key, b, tag.as_ref()).is_ok()
}

/// The client's id and secret from HTTP Basic (RFC 6749 2.3.1: each
/// form-urlencoded) or from the body (`client_secret_post`), not both.
fn credentials(
    req: &HttpRequest,
    form: &HashMap<String, String>,
) -> Result<Option<(String, String)>, Refusal> {
    let basic = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "));
    let in_body = (form.get("client_id"), form.get("client_secret"));
    match (basic, in_body) {
        (Some(_), (_, Some(_))) => Err(Refusal(
            400,
            "invalid_request",
            "one client authentication method at a time",
        )),
        (Some(b), _) => {
            let decoded = STANDARD
                .decode(b.trim())
                .ok()
                .and_then(|d| String::from_utf8(d).ok())
                .ok_or(Refusal(
                    401,
                    "invalid_client",
                    "malformed Basic credentials",
                ))?;
            let (id, secret) = decoded.split_once(':').ok_or(Refusal(
                401,
                "invalid_client",
                "malformed Basic credentials",
            ))?;
            let dec = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            Ok(Some((dec(id), dec(secret))))
        }
        (None, (Some(id), Some(secret))) => Ok(Some((id.clone(), secret.clone()))),
        (None, _) => Ok(None),
    }
}

/// POST /oauth/token (form-urlencoded).
#[tracing::instrument(skip_all)]
pub async fn token(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let form_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(ApiError::UnsupportedMediaType);
    }
    if body.len() > BODY_MAX {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "the request is too large",
        ));
    }
    let mut form: HashMap<String, String> = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(&body) {
        if form.insert(k.to_string(), v.into_owned()).is_some() {
            return Ok(oauth_error(
                400,
                "invalid_request",
                &format!("{k} given twice"),
            ));
        }
    }
    let creds = match credentials(&req, &form) {
        Ok(c) => c,
        Err(Refusal(status, code, why)) => return Ok(oauth_error(status, code, why)),
    };
    match form.get("grant_type").map(String::as_str) {
        Some("client_credentials") => {}
        Some(_) => {
            return Ok(oauth_error(
                400,
                "unsupported_grant_type",
                "this provider grants client_credentials",
            ))
        }
        None => {
            return Ok(oauth_error(
                400,
                "invalid_request",
                "grant_type is required",
            ))
        }
    }
    let Some((client_id, secret)) = creds else {
        return Ok(oauth_error(
            401,
            "invalid_client",
            "client authentication is required",
        ));
    };
    // One answer for every way the client can be wrong (unknown, retired,
    // public, wrong secret): nothing tells which.
    let refused = || oauth_error(401, "invalid_client", "unknown client or wrong secret");
    let Ok(id) = Uuid::parse_str(&client_id) else {
        return Ok(refused());
    };
    if secret.len() > tokens::MAX_TOKEN_LEN {
        return Ok(refused());
    }
    let Some(client) = clients::authenticating(&state.pool, id).await? else {
        return Ok(refused());
    };
    let Some(stored) = client.secret_hash.as_deref() else {
        return Ok(refused());
    };
    if !same_hash(stored, &tokens::hash(&secret)) {
        return Ok(refused());
    }
    // Scopes: what it asks among what it may have, never a user's.
    let grantable: Vec<&str> = client
        .scopes
        .iter()
        .map(String::as_str)
        .filter(|s| !matches!(*s, "openid" | "offline_access"))
        .collect();
    let scopes: Vec<&str> = match form.get("scope") {
        Some(asked) => {
            let asked: Vec<&str> = asked.split(' ').filter(|s| !s.is_empty()).collect();
            if let Some(bad) = asked.iter().find(|s| !grantable.contains(s)) {
                return Ok(oauth_error(
                    400,
                    "invalid_scope",
                    &format!("{bad} is not a scope this client may have without a user"),
                ));
            }
            asked
        }
        None => grantable,
    };
    let Some(sealer) = &state.sealer else {
        return Err(ApiError::Unavailable(
            "the OpenID Provider is not configured (identity has no sealing.keys)".into(),
        ));
    };
    let now = state.clock.now();
    let Some((kid, pair)) = oidc_keys::signing_key(&state.pool, sealer, now)
        .await
        .map_err(ApiError::internal)?
    else {
        return Err(ApiError::Unavailable(
            "no signing key yet; try again".into(),
        ));
    };
    let life = state.oidc.access_token_secs;
    let iat = now.unix_timestamp();
    let scope = scopes.join(" ");
    let claims = json!({
        "iss": state.oidc.issuer,
        "sub": client.id,
        "aud": state.oidc.issuer,
        "client_id": client.id,
        "iat": iat,
        "exp": iat + life,
        "jti": Uuid::now_v7(),
        "scope": scope,
    });
    let token = oidc_keys::jwt(&pair, &kid, "at+jwt", &claims).map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(json!({
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": life,
            "scope": scope,
        })))
}
