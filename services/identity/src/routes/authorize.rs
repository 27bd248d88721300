//! The OpenID Provider's front channel: `GET /oauth/authorize` checks an
//! authorization request (RFC 6749 4.1.1, OIDC Core 3.1.2.1) and sends the
//! browser to the console's sign-in (`oidc.login_url?request=<handle>`); the
//! console, with the person's session, reads the request, accepts or refuses
//! it (`POST /v1/oauth/authorization[/accept|/reject]`) and sends the browser
//! on to the client with a code. `GET /oauth/userinfo` and RP-initiated
//! logout (`GET /oauth/logout`) live here too.
//!
//! Rules: the client and its redirect URI (an exact match) are checked first;
//! until both are known good, errors are answered here (400), never sent to
//! the URI. PKCE with S256 is required of every client. First-party clients
//! need no consent; third-party ones get it once per scope set. `iss` is on
//! every response to the client (RFC 9207).

use super::oauth::{auth_param, oauth_error, person_claims, sid, token_live, verify_access};
use crate::{
    oauth::{self, NewRequest},
    oauth_clients::{self as clients, Authenticating},
    state::AppState,
    tokens,
};
use actix_web::{http::header, web, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, SessionCaller},
    jwt::Expect,
    ApiError, ApiResult,
};
use std::collections::HashMap;
use time::Duration;
use uuid::Uuid;

/// Longest `state` and `nonce`, in bytes.
const STATE_MAX: usize = 512;
/// Authorization request handles carry this prefix.
const HANDLE_PREFIX: &str = "hub_ar_";
/// Codes carry this prefix.
const CODE_PREFIX: &str = "hub_ac_";
/// Longest `max_age` taken (a year), in seconds.
const MAX_AGE_MAX: i64 = 366 * 86_400;

/// `uri` with `params` added to its query.
fn with_params(uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(uri) {
        Ok(mut u) => {
            {
                let mut q = u.query_pairs_mut();
                for (k, v) in params {
                    q.append_pair(k, v);
                }
            }
            u.to_string()
        }
        Err(_) => uri.to_owned(),
    }
}

/// A front-channel request's parameters: the query of a GET, the form body of
/// a POST (OIDC Core 3.1.2.1).
fn request_params<'a>(req: &'a HttpRequest, body: &'a [u8]) -> &'a [u8] {
    if req.method() == actix_web::http::Method::POST {
        body
    } else {
        req.query_string().as_bytes()
    }
}

fn found(location: &str) -> HttpResponse {
    HttpResponse::Found()
        .insert_header((header::LOCATION, location))
        .insert_header(("cache-control", "no-store"))
        .finish()
}

/// Count an authorization request against `ip` (per minute, committed at
/// once); whether it is still under `oidc.authorize_per_ip_per_minute`.
async fn authorize_allowed(state: &AppState, ip: &str) -> ApiResult<bool> {
    let max = state.oidc.authorize_per_ip_per_minute;
    Ok(
        crate::ratelimit::allow_ip_per_minute(&state.pool, state.clock.now(), "authorize", ip, max)
            .await?,
    )
}

/// GET or POST /oauth/authorize.
#[tracing::instrument(skip_all)]
pub async fn authorize(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    // Each checked request is stored until it expires: one address makes
    // a bounded number (counted before any lookup, refused ones too).
    if !authorize_allowed(&state, ctx.ip()).await? {
        return Ok(oauth_error(
            429,
            "temporarily_unavailable",
            "too many authorization requests from this address; try again in a minute",
        ));
    }
    let raw = request_params(&req, &body);
    let p = match super::oauth::form_params(raw) {
        Ok(p) => p,
        Err(why) => return Ok(oauth_error(400, "invalid_request", &why)),
    };
    // The client and the redirect URI first: no redirect before both are good.
    let Some(client) = (match p.get("client_id").map(|c| Uuid::parse_str(c)) {
        Some(Ok(id)) => clients::authenticating(&state.pool, id).await?,
        _ => None,
    }) else {
        return Ok(oauth_error(400, "invalid_request", "unknown client_id"));
    };
    let Some(redirect_uri) = p
        .get("redirect_uri")
        .filter(|u| client.redirect_uris.contains(u))
    else {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "redirect_uri is missing or not registered for this client (exact match)",
        ));
    };
    let issuer = state.oidc.issuer.as_str();
    let client_state = p.get("state").map(String::as_str);
    let refuse = |code: &str, why: &str| {
        let mut params = vec![("error", code), ("error_description", why), ("iss", issuer)];
        if let Some(s) = client_state {
            params.push(("state", s));
        }
        Ok(found(&with_params(redirect_uri, &params)))
    };
    if p.contains_key("request") {
        return refuse("request_not_supported", "request objects are not supported");
    }
    if p.contains_key("request_uri") {
        return refuse("request_uri_not_supported", "request_uri is not supported");
    }
    if p.get("response_type").map(String::as_str) != Some("code") {
        return refuse("unsupported_response_type", "response_type must be code");
    }
    if p.get("response_mode").is_some_and(|m| m != "query") {
        return refuse("invalid_request", "response_mode must be query");
    }
    if client_state.is_some_and(|s| s.len() > STATE_MAX)
        || p.get("nonce").is_some_and(|n| n.len() > STATE_MAX)
    {
        return refuse("invalid_request", "state and nonce: at most 512 bytes each");
    }
    let scopes: Vec<String> = match p.get("scope") {
        Some(s) => {
            let mut v: Vec<String> = Vec::new();
            for one in s.split(' ').filter(|x| !x.is_empty()) {
                if !client.scopes.iter().any(|c| c == one) {
                    return refuse(
                        "invalid_scope",
                        &format!("{one} is not a scope of this client"),
                    );
                }
                if !v.iter().any(|x| x == one) {
                    v.push(one.to_owned());
                }
            }
            v
        }
        None => Vec::new(),
    };
    if scopes.is_empty() {
        return refuse("invalid_scope", "scope is required");
    }
    if p.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return refuse(
            "invalid_request",
            "PKCE is required: code_challenge with code_challenge_method S256",
        );
    }
    let challenge = p.get("code_challenge").map(String::as_str).unwrap_or("");
    let well_formed = challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !well_formed {
        return refuse(
            "invalid_request",
            "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
        );
    }
    let prompt: Vec<&str> = p
        .get("prompt")
        .map(|pr| pr.split(' ').filter(|x| !x.is_empty()).collect())
        .unwrap_or_default();
    if prompt.contains(&"none") {
        // The provider keeps no cookie of its own: it cannot know without
        // showing the console.
        return refuse("login_required", "prompt=none cannot be answered here");
    }
    let now = state.clock.now();
    // prompt=login: a sign-in made for this request; max_age: one no older.
    let mut fresh_after = prompt.contains(&"login").then_some(now);
    if let Some(m) = p.get("max_age") {
        let Some(secs) = m
            .parse::<i64>()
            .ok()
            .filter(|s| (0..=MAX_AGE_MAX).contains(s))
        else {
            return refuse("invalid_request", "max_age must be a number of seconds");
        };
        let at = now - Duration::seconds(secs);
        fresh_after = Some(fresh_after.map_or(at, |f| f.max(at)));
    }
    let handle = tokens::generate(HANDLE_PREFIX).map_err(ApiError::internal)?;
    oauth::insert_request(
        &state.pool,
        NewRequest {
            handle_hash: tokens::hash(&handle),
            client_id: client.id,
            redirect_uri,
            scopes: &scopes,
            state: client_state,
            nonce: p.get("nonce").map(String::as_str),
            code_challenge: challenge,
            fresh_after,
            force_consent: prompt.contains(&"consent"),
            now,
            expires_at: now + Duration::seconds(state.oidc.request_secs),
        },
    )
    .await?;
    Ok(found(&with_params(
        &state.oidc.login_url,
        &[("request", &handle)],
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestRef {
    /// The handle the console received (`request=` of its sign-in URL).
    request: String,
    /// Accepting: the person agreed to the scopes (third-party clients).
    #[serde(default)]
    consent: bool,
}

/// The scopes `scopes` adds to what the person already agreed to give.
fn unconsented(scopes: &[String], given: &[String]) -> Vec<String> {
    scopes
        .iter()
        .filter(|s| *s != "openid" && !given.contains(s))
        .cloned()
        .collect()
}

/// An unknown, expired or answered request: 404.
fn unknown_request() -> ApiError {
    ApiError::NotFound
}

/// The waiting request of `handle` (as the console got it) and the handle's
/// hash, for the caller's session: the first session that reads a request is
/// its only reader, so a handle seen in a log is of no use to another person.
/// 404 for anything else.
async fn for_caller(
    conn: &mut sqlx::PgConnection,
    handle: &str,
    caller: &SessionCaller,
    now: time::OffsetDateTime,
) -> ApiResult<(oauth::Pending, Vec<u8>)> {
    if handle.len() > tokens::MAX_TOKEN_LEN {
        return Err(unknown_request());
    }
    let handle_hash = tokens::hash(handle);
    let r = oauth::pending(conn, &handle_hash, now)
        .await?
        .ok_or_else(unknown_request)?;
    match r.viewer_session_id {
        Some(v) if v != caller.session_id() => Err(unknown_request()),
        Some(_) => Ok((r, handle_hash)),
        None => {
            oauth::bind_viewer(
                conn,
                &handle_hash,
                hub_domain::SessionId::from_uuid(caller.session_id()),
            )
            .await?;
            Ok((r, handle_hash))
        }
    }
}

/// What still stands between the person and the code: a fresher sign-in
/// (`prompt=login`, `max_age`), and the scopes to consent to.
fn missing(r: &oauth::Pending, who: &oauth::Subject, given: &[String]) -> (bool, Vec<String>) {
    let stale = r.fresh_after.is_some_and(|f| who.auth_time < f);
    let consent = if r.force_consent {
        r.scopes
            .iter()
            .filter(|s| *s != "openid")
            .cloned()
            .collect()
    } else if r.first_party {
        Vec::new()
    } else {
        unconsented(&r.scopes, given)
    };
    (stale, consent)
}

/// POST /v1/oauth/authorization (session): what the console shows of a
/// waiting request: the client, the scopes, whether consent is needed and
/// whether the person must sign in again first.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn show(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<RequestRef>,
) -> ApiResult<HttpResponse> {
    let mut tx = state.pool.begin().await?;
    let (r, _) = for_caller(&mut tx, &body.request, &caller, state.clock.now()).await?;
    let session_id = hub_domain::SessionId::from_uuid(caller.session_id());
    let Some(who) = oauth::subject(&mut tx, session_id).await? else {
        return Err(ApiError::unauthorized("the session has ended"));
    };
    let given = oauth::consented(&mut tx, caller.user_id(), r.client_id).await?;
    tx.commit().await?;
    let (stale, consent) = missing(&r, &who, &given);
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(json!({
            "client": {"id": r.client_id, "name": r.client_name, "first_party": r.first_party},
            "scopes": r.scopes,
            "consent_required": !consent.is_empty(),
            "scopes_to_consent": consent,
            "fresh_sign_in_required": stale,
            "redirect_uri": r.redirect_uri,
            "expires_at": r.expires_at.format(&time::format_description::well_known::Rfc3339).ok(),
        })))
}

/// POST /v1/oauth/authorization/accept (session): the person signed in says
/// yes. 409 while a third-party client's scopes need consent not given
/// (`consent: true`). A client limited to organizations the person is not a
/// member of gets `access_denied`. Answers `{redirect_to}`: the client's URI
/// with the code, `state` and `iss`.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn accept(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<RequestRef>,
) -> ApiResult<HttpResponse> {
    let now = state.clock.now();
    let session_id = hub_domain::SessionId::from_uuid(caller.session_id());
    let mut tx = state.pool.begin().await?;
    let (r, handle_hash) = for_caller(&mut tx, &body.request, &caller, now).await?;
    let Some(who) = oauth::subject(&mut tx, session_id).await? else {
        return Err(ApiError::unauthorized("the session has ended"));
    };
    let issuer = state.oidc.issuer.as_str();
    let mut params: Vec<(&str, &str)> = vec![("iss", issuer)];
    if let Some(s) = r.state.as_deref() {
        params.push(("state", s));
    }
    if !who.may_use(&r.allowed_org_ids) {
        oauth::delete_request(&mut tx, &handle_hash).await?;
        tx.commit().await?;
        params.push(("error", "access_denied"));
        params.push((
            "error_description",
            "this client is limited to organizations you are not a member of",
        ));
        return Ok(redirect_to(&with_params(&r.redirect_uri, &params)));
    }
    let given = oauth::consented(&mut tx, caller.user_id(), r.client_id).await?;
    let (stale, consent) = missing(&r, &who, &given);
    if stale {
        // The console signs the person in again (a new session, which the
        // request does not know: the client starts over).
        return Err(ApiError::Conflict(
            "a fresh sign-in is required (prompt=login or max_age): sign in again".into(),
        ));
    }
    if !consent.is_empty() {
        if !body.consent {
            return Err(ApiError::Conflict(
                "consent required: the person must agree to this client's scopes (consent: true)"
                    .into(),
            ));
        }
        oauth::consent(&mut tx, caller.user_id(), r.client_id, &r.scopes, now).await?;
    }
    let code = tokens::generate(CODE_PREFIX).map_err(ApiError::internal)?;
    oauth::accept(
        &mut tx,
        &handle_hash,
        caller.user_id(),
        session_id,
        &tokens::hash(&code),
        now + Duration::seconds(state.oidc.code_secs),
    )
    .await?;
    tx.commit().await?;
    params.push(("code", &code));
    Ok(redirect_to(&with_params(&r.redirect_uri, &params)))
}

/// POST /v1/oauth/authorization/reject (session): the person says no; the
/// client hears `access_denied`.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn reject(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<RequestRef>,
) -> ApiResult<HttpResponse> {
    let mut tx = state.pool.begin().await?;
    let (r, handle_hash) = for_caller(&mut tx, &body.request, &caller, state.clock.now()).await?;
    oauth::delete_request(&mut tx, &handle_hash).await?;
    tx.commit().await?;
    let mut params: Vec<(&str, &str)> = vec![
        ("error", "access_denied"),
        ("error_description", "the person refused"),
        ("iss", &state.oidc.issuer),
    ];
    if let Some(s) = r.state.as_deref() {
        params.push(("state", s));
    }
    Ok(redirect_to(&with_params(&r.redirect_uri, &params)))
}

fn redirect_to(uri: &str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(json!({ "redirect_to": uri }))
}

/// A 401 of a protected resource (RFC 6750 3).
fn invalid_token(why: &str) -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header(("cache-control", "no-store"))
        .insert_header((
            "www-authenticate",
            format!("Bearer error=\"invalid_token\", error_description=\"{why}\""),
        ))
        .json(json!({"error": "invalid_token", "error_description": why}))
}

/// GET or POST /oauth/userinfo (OIDC Core 5.3): the person behind an access
/// token with `openid`, while their session lives: `sub`, and what the
/// token's scopes open (`email`, `email_verified`, `name`, `orgs`).
#[tracing::instrument(skip_all)]
pub async fn userinfo(state: web::Data<AppState>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let Some(token) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| auth_param(v, "bearer"))
    else {
        return Ok(HttpResponse::Unauthorized()
            .insert_header(("www-authenticate", "Bearer"))
            .json(json!({"error": "invalid_request", "error_description": "a Bearer access token is required"})));
    };
    let now = state.clock.now();
    let Some(claims) = verify_access(&state, token.trim(), now).await? else {
        return Ok(invalid_token("the access token is invalid or expired"));
    };
    let scopes: Vec<String> = claims["scope"]
        .as_str()
        .unwrap_or("")
        .split(' ')
        .map(str::to_owned)
        .collect();
    let Some(sid) = sid(&claims).filter(|_| scopes.iter().any(|s| s == "openid")) else {
        return Ok(HttpResponse::Forbidden()
            .insert_header(("www-authenticate", "Bearer error=\"insufficient_scope\""))
            .json(json!({"error": "insufficient_scope", "error_description": "a person's token with openid is required"})));
    };
    let mut conn = state.pool.acquire().await?;
    if !token_live(&mut conn, &claims).await? {
        return Ok(invalid_token(
            "the sign-in or grant behind this token has ended",
        ));
    }
    let Some(who) = oauth::subject(&mut conn, sid).await? else {
        return Ok(invalid_token("the sign-in behind this token has ended"));
    };
    let mut out = json!({"sub": who.user_id});
    person_claims(&mut out, &who, &scopes);
    if scopes.iter().any(|s| s == "orgs") {
        out["orgs"] = claims["orgs"].clone();
    }
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(out))
}

/// GET or POST /oauth/logout (OpenID Connect RP-Initiated Logout 1.0): with
/// an ID token this provider issued (`id_token_hint`, expired or not), the
/// hub session it names ends (everywhere: the console too, and every grant
/// made from it). The browser goes to `post_logout_redirect_uri` (with
/// `state`) when it is one the client registered exactly; otherwise the
/// answer is `{"status": "logged_out"}`.
#[tracing::instrument(skip_all)]
pub async fn logout(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let raw = request_params(&req, &body);
    let p: HashMap<String, String> = match super::oauth::form_params(raw) {
        Ok(p) => p,
        Err(why) => return Ok(oauth_error(400, "invalid_request", &why)),
    };
    let Some(hint) = p.get("id_token_hint") else {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "id_token_hint is required",
        ));
    };
    // The audience is the client; read it, then verify the token for it.
    let aud = hint
        .split('.')
        .nth(1)
        .and_then(|c| {
            use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
            URL_SAFE_NO_PAD.decode(c).ok()
        })
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|c| c["aud"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let now = state.clock.now();
    let expect = Expect {
        typ: "JWT",
        iss: &state.oidc.issuer,
        aud: &aud,
        now: now.unix_timestamp(),
        allow_expired: true,
    };
    let claims = match state
        .oidc_keys
        .verify(&state.pool, now, hint, &expect)
        .await
        .map_err(ApiError::internal)?
    {
        Ok(c) => c,
        Err(_) => {
            return Ok(oauth_error(
                400,
                "invalid_request",
                "id_token_hint is not an ID token of this provider",
            ))
        }
    };
    if p.get("client_id").is_some_and(|c| *c != aud) {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "client_id is not the ID token's audience",
        ));
    }
    let client: Option<Authenticating> = match Uuid::parse_str(&aud) {
        Ok(id) => clients::authenticating(&state.pool, id).await?,
        Err(_) => None,
    };
    let user = claims["sub"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .map(hub_domain::UserId::from_uuid);
    let first_party = client.as_ref().is_some_and(|c| c.first_party);
    if let (Some(sid), Some(c), false) = (sid(&claims), client.as_ref(), first_party) {
        // A third-party client signs the person out of itself only: its
        // grants from that sign-in end; the hub session stays.
        let mut tx = state.pool.begin().await?;
        oauth::revoke_client_grants(&mut tx, c.id, sid, now).await?;
        tx.commit().await?;
    } else if let (Some(sid), Some(user)) = (sid(&claims), user) {
        match super::auth::revoke(
            &state,
            user,
            sid,
            event_contracts::AuditAction::Logout,
            ctx.ip(),
        )
        .await
        {
            Ok(()) | Err(ApiError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    let target = p.get("post_logout_redirect_uri").filter(|u| {
        client
            .as_ref()
            .is_some_and(|c| c.post_logout_redirect_uris.contains(u))
    });
    match target {
        Some(uri) => {
            let mut params: Vec<(&str, &str)> = Vec::new();
            if let Some(s) = p.get("state") {
                params.push(("state", s));
            }
            Ok(found(&with_params(uri, &params)))
        }
        None => Ok(HttpResponse::Ok()
            .insert_header(("cache-control", "no-store"))
            .json(json!({"status": "logged_out"}))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRef {
    /// The user code the device showed (`XXXX-XXXX`; case and separators
    /// do not matter).
    user_code: String,
    /// Accepting: the person agreed to the scopes (third-party clients).
    #[serde(default)]
    consent: bool,
}

/// User codes a person may try per ten minutes (a code is about 34 bits).
const USER_CODE_TRIES: i64 = 30;

/// The waiting device request of the caller's user code, after the
/// rate limit on entering codes (429 beyond it); 404 for a code that is not
/// one, unknown, expired or answered.
async fn device_for_caller(
    state: &AppState,
    tx: &mut sqlx::PgConnection,
    caller: &SessionCaller,
    typed: &str,
) -> ApiResult<oauth::PendingDevice> {
    let bucket = format!("device:user:{}", caller.user_id());
    let allowed = crate::ratelimit::check_and_record(
        tx,
        state.clock.now(),
        &[crate::ratelimit::Limit {
            bucket: &bucket,
            max: USER_CODE_TRIES,
            window_secs: 600,
        }],
    )
    .await?;
    if !allowed {
        return Err(ApiError::TooManyRequests);
    }
    let code = super::oauth::user_code(typed).ok_or_else(unknown_request)?;
    oauth::pending_device(tx, &tokens::hash(&code), state.clock.now())
        .await?
        .ok_or_else(unknown_request)
}

/// POST /v1/oauth/device (session): what the console shows of the device
/// request whose user code the person typed.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn show_device(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<DeviceRef>,
) -> ApiResult<HttpResponse> {
    let mut tx = state.pool.begin().await?;
    let found = device_for_caller(&state, &mut tx, &caller, &body.user_code).await;
    // The attempt counts whatever the answer.
    let d = match found {
        Ok(d) => d,
        Err(e) => {
            tx.commit().await?;
            return Err(e);
        }
    };
    let given = oauth::consented(&mut tx, caller.user_id(), d.client_id).await?;
    tx.commit().await?;
    let consent = if d.first_party {
        Vec::new()
    } else {
        unconsented(&d.scopes, &given)
    };
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(json!({
            "client": {"id": d.client_id, "name": d.client_name, "first_party": d.first_party},
            "scopes": d.scopes,
            "consent_required": !consent.is_empty(),
            "scopes_to_consent": consent,
            "expires_at": d.expires_at.format(&time::format_description::well_known::Rfc3339).ok(),
        })))
}

/// POST /v1/oauth/device/accept and /reject (session): the person's answer.
/// Accepting binds the device's grant to the caller's session; 409 while a
/// third-party client's scopes need consent not given; a client limited to
/// organizations the person is not a member of is refused (403).
async fn answer_device(
    state: &AppState,
    caller: &SessionCaller,
    body: &DeviceRef,
    approve: bool,
) -> ApiResult<HttpResponse> {
    let session_id = hub_domain::SessionId::from_uuid(caller.session_id());
    let mut tx = state.pool.begin().await?;
    let d = match device_for_caller(state, &mut tx, caller, &body.user_code).await {
        Ok(d) => d,
        Err(e) => {
            tx.commit().await?;
            return Err(e);
        }
    };
    if approve {
        let Some(who) = oauth::subject(&mut tx, session_id).await? else {
            return Err(ApiError::unauthorized("the session has ended"));
        };
        if !who.may_use(&d.allowed_org_ids) {
            return Err(ApiError::Forbidden(
                "this client is limited to organizations you are not a member of".into(),
            ));
        }
        if !d.first_party {
            let given = oauth::consented(&mut tx, caller.user_id(), d.client_id).await?;
            if !unconsented(&d.scopes, &given).is_empty() {
                if !body.consent {
                    tx.commit().await?;
                    return Err(ApiError::Conflict(
                        "consent required: the person must agree to this client's scopes (consent: true)"
                            .into(),
                    ));
                }
                let now = state.clock.now();
                oauth::consent(&mut tx, caller.user_id(), d.client_id, &d.scopes, now).await?;
            }
        }
    }
    oauth::answer_device(
        &mut tx,
        &d.device_code_hash,
        caller.user_id(),
        session_id,
        approve,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(json!({ "status": if approve { "approved" } else { "denied" } })))
}

/// POST /v1/oauth/device/accept (session).
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn accept_device(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<DeviceRef>,
) -> ApiResult<HttpResponse> {
    answer_device(&state, &caller, &body, true).await
}

/// POST /v1/oauth/device/reject (session).
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn reject_device(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<DeviceRef>,
) -> ApiResult<HttpResponse> {
    answer_device(&state, &caller, &body, false).await
}
