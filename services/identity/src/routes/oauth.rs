//! The OpenID Provider's back-channel endpoints, for clients (RFC 6749,
//! 7662, 7009): the token endpoint `POST /oauth/token` (client credentials,
//! authorization code with PKCE, refresh token with rotation and reuse
//! detection), `POST /oauth/introspect` and `POST /oauth/revoke`. Requests
//! are form-urlencoded; errors are RFC 6749 5.2's (`{"error": code,
//! "error_description"}`), never cached.
//!
//! Client authentication: a confidential client by HTTP Basic or
//! `client_secret_post`; a public client names itself with `client_id` and
//! proves nothing but PKCE. Every way a client can be wrong gets the same 401
//! `invalid_client`.

use crate::{
    oauth::{self, Grant, Subject},
    oauth_clients::{self as clients, Authenticating},
    oidc_keys::Signer,
    state::AppState,
    tokens,
};
use actix_web::{http::header, web, HttpRequest, HttpResponse};
use base64::{
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
    Engine,
};
use hub_domain::SessionId;
use ring::digest;
use serde_json::{json, Value};
use service_kit::{jwt::Expect, ApiError, ApiResult};
use std::{collections::HashMap, sync::Arc};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// Longest request body, in bytes.
const BODY_MAX: usize = 8192;
/// Refresh tokens carry this prefix (and are 256 random bits).
const REFRESH_PREFIX: &str = "hub_rt_";
/// The device code grant's type (RFC 8628 3.4).
pub(super) const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Device codes carry this prefix.
const DEVICE_PREFIX: &str = "hub_dc_";
/// User codes: 8 letters of this alphabet (no vowels, no look-alikes: RFC
/// 8628 6.1), shown as XXXX-XXXX; about 34 bits, and entering them is
/// rate-limited.
pub(super) const USER_CODE_ALPHABET: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

/// An RFC 6749 5.2 error.
pub(super) fn oauth_error(status: u16, code: &str, description: &str) -> HttpResponse {
    let mut r = HttpResponse::build(
        actix_web::http::StatusCode::from_u16(status)
            .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST),
    );
    r.insert_header(("cache-control", "no-store"));
    if status == 401 {
        r.insert_header(("www-authenticate", "Basic realm=\"hub\""));
    }
    if status == 429 {
        r.insert_header(("retry-after", "60"));
    }
    r.json(json!({"error": code, "error_description": description}))
}

/// The credentials of an `Authorization` value of `scheme` (compared
/// case-insensitively, RFC 9110 11.1).
pub(super) fn auth_param<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (s, rest) = value.split_once(' ')?;
    s.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

/// Form parameters (`application/x-www-form-urlencoded`, each at most once:
/// RFC 6749 3.1).
/// The error is an RFC 6749 `invalid_request` description.
pub(super) fn form_params(raw: &[u8]) -> Result<HashMap<String, String>, String> {
    if raw.len() > BODY_MAX {
        return Err("the request is too large".into());
    }
    let mut form: HashMap<String, String> = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(raw) {
        if form.insert(k.to_string(), v.into_owned()).is_some() {
            return Err(format!("{k} given twice"));
        }
    }
    Ok(form)
}

/// A form body of a client's request; 415 for another content type.
fn form_body(req: &HttpRequest, body: &[u8]) -> ApiResult<Result<HashMap<String, String>, String>> {
    let form_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(ApiError::UnsupportedMediaType);
    }
    Ok(form_params(body))
}

/// The client making the request: a confidential one by its secret (HTTP
/// Basic, RFC 6749 2.3.1, each part form-urlencoded; or in the body), a
/// public one by `client_id` alone. `confidential_only` refuses public ones.
/// `cached`: a copy from [`clients::ClientCache`] may do, for a caller that
/// checks it is current where it acts (the refresh grant's hot path).
async fn client(
    state: &AppState,
    req: &HttpRequest,
    form: &HashMap<String, String>,
    confidential_only: bool,
    cached: bool,
) -> ApiResult<Result<Arc<Authenticating>, HttpResponse>> {
    let refused = || oauth_error(401, "invalid_client", "unknown client or wrong secret");
    let basic = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| auth_param(v, "basic"));
    let (id, secret) = match (basic, form.get("client_secret")) {
        (Some(_), Some(_)) => {
            return Ok(Err(oauth_error(
                400,
                "invalid_request",
                "one client authentication method at a time",
            )))
        }
        (Some(b), None) => {
            let Some((id, secret)) = STANDARD
                .decode(b.trim())
                .ok()
                .and_then(|d| String::from_utf8(d).ok())
                .and_then(|d| d.split_once(':').map(|(a, b)| (a.to_owned(), b.to_owned())))
            else {
                return Ok(Err(oauth_error(
                    401,
                    "invalid_client",
                    "malformed Basic credentials",
                )));
            };
            let dec = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            if form.get("client_id").is_some_and(|c| *c != dec(&id)) {
                return Ok(Err(refused()));
            }
            // An empty secret is none (some libraries send `id:` for a
            // public client).
            let secret = dec(&secret);
            (dec(&id), (!secret.is_empty()).then_some(secret))
        }
        (None, secret) => match form.get("client_id") {
            Some(id) => (id.clone(), secret.cloned()),
            None => {
                return Ok(Err(oauth_error(
                    401,
                    "invalid_client",
                    "client authentication is required",
                )))
            }
        },
    };
    let Ok(id) = Uuid::parse_str(&id) else {
        return Ok(Err(refused()));
    };
    if secret
        .as_ref()
        .is_some_and(|s| s.len() > tokens::MAX_TOKEN_LEN)
    {
        return Ok(Err(refused()));
    }
    let authenticates = |c: &Authenticating| match (&c.secret_hash, &secret) {
        (Some(stored), Some(given)) => service_kit::same_secret(stored, &tokens::hash(given)),
        // A public client proves nothing; it may not pretend to a secret.
        (None, None) => !confidential_only,
        _ => false,
    };
    if cached {
        if let Some(c) = state.clients.get(id) {
            if authenticates(&c) {
                return Ok(Ok(c));
            }
            // Perhaps a rotated secret: ask the database.
            state.clients.forget(id);
        }
    }
    let Some(c) = clients::authenticating(&state.pool, id).await? else {
        return Ok(Err(refused()));
    };
    let c = Arc::new(c);
    if !authenticates(&c) {
        return Ok(Err(refused()));
    }
    if cached {
        state.clients.put(c.clone());
    }
    Ok(Ok(c))
}

/// The signing key, or 503.
pub(super) async fn signer(state: &AppState, now: OffsetDateTime) -> ApiResult<Signer> {
    let Some(sealer) = &state.sealer else {
        return Err(ApiError::Unavailable(
            "the OpenID Provider is not configured (identity has no sealing.keys)".into(),
        ));
    };
    state
        .oidc_keys
        .signer(&state.pool, sealer, now)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::Unavailable("no signing key yet; try again".into()))
}

/// How the person signed in: the session's RFC 8176 `amr` values (kept
/// when it was opened: `email`, then `otp` or a passkey's `hwk`/`swk` with
/// `user`, and `mfa` once two factors or a verified passkey were shown) and
/// the `acr`.
fn amr_acr(grant: &Grant) -> (Value, &'static str) {
    let acr = if grant.mfa {
        "urn:hub:acr:mfa"
    } else {
        "urn:hub:acr:link"
    };
    (json!(grant.amr), acr)
}

/// An access token's claims for a person (RFC 9068): the memberships the
/// client may see when it has `orgs` (active organizations among its allowed
/// ones), `staff` (first-party clients only), the session (`sid`) and the
/// grant (`gid`) whose liveness it depends on.
pub(super) fn access_claims(
    state: &AppState,
    now: OffsetDateTime,
    client: &Authenticating,
    grant: &Grant,
    who: &Subject,
    scope: &str,
) -> Value {
    let iat = now.unix_timestamp();
    let (amr, acr) = amr_acr(grant);
    let mut c = json!({
        "iss": state.oidc.issuer,
        "sub": who.user_id,
        "aud": state.oidc.issuer,
        "client_id": client.id,
        "iat": iat,
        "exp": iat + state.oidc.access_token_secs,
        "jti": Uuid::now_v7(),
        "scope": scope,
        "sid": grant.session_id,
        "gid": grant.id,
        "auth_time": grant.auth_time.unix_timestamp(),
        "acr": acr,
        "amr": amr,
        // Staff powers travel only in first-party clients' tokens.
        "staff": client.first_party
            && state.is_staff_session(&who.email, who.staff_granted, who.mfa),
    });
    if scope.split(' ').any(|s| s == "orgs") {
        let orgs: Vec<Value> = who
            .memberships
            .iter()
            .filter(|m| oauth::org_allowed(&client.allowed_org_ids, m.org_id))
            .map(|m| json!({"org_id": m.org_id, "role": m.role}))
            .collect();
        c["orgs"] = Value::Array(orgs);
    }
    c
}

/// The claims about the person that `scopes` open (userinfo, ID tokens).
pub(super) fn person_claims(c: &mut Value, who: &Subject, scopes: &[String]) {
    if scopes.iter().any(|s| s == "email") {
        c["email"] = json!(who.email);
        // Every sign-in went through the address (a link mailed to it).
        c["email_verified"] = json!(true);
    }
    if scopes.iter().any(|s| s == "profile") {
        c["name"] = json!(who.name);
    }
}

/// `at_hash` (OIDC Core 3.1.3.6): the left half of the access token's SHA-256.
fn at_hash(access_token: &str) -> String {
    let d = digest::digest(&digest::SHA256, access_token.as_bytes());
    URL_SAFE_NO_PAD.encode(&d.as_ref()[..16])
}

/// What a grant's token response is made of.
struct Issue<'a> {
    client: &'a Authenticating,
    grant: &'a Grant,
    who: &'a Subject,
    /// The access token's scopes (the grant's, or fewer on a refresh).
    scope: &'a str,
    nonce: Option<&'a str>,
    refresh: Option<String>,
}

/// The token response of a grant: an access token, an ID token when
/// `openid` was granted, a refresh token when one was made.
fn tokens_response(
    state: &AppState,
    signer: &Signer,
    now: OffsetDateTime,
    i: Issue<'_>,
) -> ApiResult<HttpResponse> {
    let Issue {
        client,
        grant,
        who,
        scope,
        nonce,
        refresh,
    } = i;
    let access = access_claims(state, now, client, grant, who, scope);
    let access_token = crate::oidc_keys::jwt(&signer.pair, &signer.kid, "at+jwt", &access)
        .map_err(ApiError::internal)?;
    let mut body = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": state.oidc.access_token_secs,
        "scope": scope,
    });
    if scope.split(' ').any(|s| s == "openid") {
        let iat = now.unix_timestamp();
        let (amr, acr) = amr_acr(grant);
        let mut id = json!({
            "iss": state.oidc.issuer,
            "sub": who.user_id,
            "aud": client.id,
            "azp": client.id,
            "iat": iat,
            "exp": iat + state.oidc.access_token_secs,
            "auth_time": grant.auth_time.unix_timestamp(),
            "sid": grant.session_id,
            "acr": acr,
            "amr": amr,
            "at_hash": at_hash(&access_token),
        });
        if let Some(n) = nonce {
            id["nonce"] = json!(n);
        }
        let asked: Vec<String> = scope.split(' ').map(str::to_owned).collect();
        person_claims(&mut id, who, &asked);
        body["id_token"] = json!(crate::oidc_keys::jwt(&signer.pair, &signer.kid, "JWT", &id)
            .map_err(ApiError::internal)?);
    }
    if let Some(r) = refresh {
        body["refresh_token"] = json!(r);
    }
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(body))
}

/// A client's request: its form and the client it authenticated as (or the
/// answer that refuses it). `confidential_only` refuses public clients.
async fn client_request(
    state: &AppState,
    req: &HttpRequest,
    body: &[u8],
    confidential_only: bool,
) -> ApiResult<Result<(HashMap<String, String>, Arc<Authenticating>), HttpResponse>> {
    let form = match form_body(req, body)? {
        Ok(f) => f,
        Err(why) => return Ok(Err(oauth_error(400, "invalid_request", &why))),
    };
    Ok(client(state, req, &form, confidential_only, false)
        .await?
        .map(|c| (form, c)))
}

/// POST /oauth/token (form-urlencoded).
#[tracing::instrument(skip_all)]
pub async fn token(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let form = match form_body(&req, &body)? {
        Ok(f) => f,
        Err(why) => return Ok(oauth_error(400, "invalid_request", &why)),
    };
    let grant_type = match form.get("grant_type").map(String::as_str) {
        Some(
            g @ ("client_credentials" | "authorization_code" | "refresh_token" | DEVICE_GRANT),
        ) => g,
        Some(_) => {
            return Ok(oauth_error(
                400,
                "unsupported_grant_type",
                "this provider grants authorization_code, refresh_token, client_credentials and the device code",
            ))
        }
        None => {
            return Ok(oauth_error(
                400,
                "invalid_request",
                "grant_type is required",
            ))
        }
    };
    // The refresh grant's hot path checks the client it was given is
    // current in its own statement; everything else looks it up.
    let hot = grant_type == "refresh_token" && !form.contains_key("scope");
    let c = match client(&state, &req, &form, grant_type == "client_credentials", hot).await? {
        Ok(c) => c,
        Err(r) => return Ok(r),
    };
    match grant_type {
        "client_credentials" => client_credentials(&state, &c, &form).await,
        "authorization_code" => authorization_code(&state, &c, &form).await,
        DEVICE_GRANT => device_code(&state, &c, &form).await,
        _ => refresh_token(&state, &req, c, hot, &form).await,
    }
}

/// RFC 6749 4.4: a confidential client's own token, no person in it.
async fn client_credentials(
    state: &AppState,
    client: &Authenticating,
    form: &HashMap<String, String>,
) -> ApiResult<HttpResponse> {
    // Scopes: what it asks among what it may have, never a person's.
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
    let now = state.clock.now();
    let signer = signer(state, now).await?;
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
    let token = crate::oidc_keys::jwt(&signer.pair, &signer.kid, "at+jwt", &claims)
        .map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(json!({
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": life,
            "scope": scope,
        })))
}

/// Whether `verifier` (RFC 7636 4.1: 43 to 128 unreserved characters) hashes
/// to `challenge` under S256.
fn pkce_ok(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    if !well_formed {
        return false;
    }
    let d = digest::digest(&digest::SHA256, verifier.as_bytes());
    service_kit::same_secret(
        URL_SAFE_NO_PAD.encode(d.as_ref()).as_bytes(),
        challenge.as_bytes(),
    )
}

/// A new refresh token for `grant_id`, stored (its hash) in `conn`'s transaction.
async fn new_refresh(
    state: &AppState,
    conn: &mut sqlx::PgConnection,
    grant_id: Uuid,
    now: OffsetDateTime,
) -> ApiResult<String> {
    let t = tokens::generate(REFRESH_PREFIX).map_err(ApiError::internal)?;
    oauth::insert_refresh(
        conn,
        &tokens::hash(&t),
        grant_id,
        now,
        now + Duration::seconds(state.oidc.refresh_token_secs),
    )
    .await?;
    Ok(t)
}

/// A new grant of `scopes` to `client` for the person `who` signed in as
/// `session_id` (the code flow's and the device flow's), stored in `conn`'s
/// transaction, with its first refresh token when `offline_access` is among
/// them.
async fn open_grant(
    state: &AppState,
    conn: &mut sqlx::PgConnection,
    client: &Authenticating,
    who: &Subject,
    session_id: SessionId,
    scopes: Vec<String>,
    now: OffsetDateTime,
) -> ApiResult<(Grant, Option<String>)> {
    let grant = Grant {
        id: Uuid::now_v7(),
        client_id: client.id,
        user_id: who.user_id,
        session_id,
        scopes,
        auth_time: who.auth_time,
        mfa: who.mfa,
        amr: who.amr.clone(),
    };
    oauth::insert_grant(conn, &grant, now).await?;
    let refresh = if grant.scopes.iter().any(|s| s == "offline_access") {
        Some(new_refresh(state, conn, grant.id, now).await?)
    } else {
        None
    };
    Ok((grant, refresh))
}

/// RFC 6749 4.1.3 with RFC 7636: a code, once, by the client it was made
/// for, with the redirect URI it was sent to and the PKCE verifier. A code
/// used twice revokes the grant its first use made (RFC 6749 4.1.2).
async fn authorization_code(
    state: &AppState,
    client: &Authenticating,
    form: &HashMap<String, String>,
) -> ApiResult<HttpResponse> {
    let (Some(code), Some(redirect_uri)) = (form.get("code"), form.get("redirect_uri")) else {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "code and redirect_uri are required",
        ));
    };
    let Some(verifier) = form.get("code_verifier") else {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "code_verifier is required (PKCE)",
        ));
    };
    let invalid = |why: &str| Ok(oauth_error(400, "invalid_grant", why));
    if code.len() > tokens::MAX_TOKEN_LEN {
        return invalid("unknown code");
    }
    let now = state.clock.now();
    let signer = signer(state, now).await?;
    let mut tx = state.pool.begin().await?;
    let Some(c) = oauth::code(&mut tx, &tokens::hash(code)).await? else {
        return invalid("unknown code");
    };
    if c.client_id != client.id {
        return invalid("unknown code");
    }
    if c.code_used_at.is_some() {
        if let Some(g) = c.grant_id {
            oauth::revoke_grant(&mut tx, g, now).await?;
            tx.commit().await?;
            tracing::warn!(client_id = %client.id, grant_id = %g, "authorization code replayed; its grant is revoked");
        }
        return invalid("the code was already used");
    }
    let (Some(user_id), Some(session_id), Some(expires)) =
        (c.user_id, c.session_id, c.code_expires_at)
    else {
        return invalid("unknown code");
    };
    if expires <= now {
        return invalid("the code has expired");
    }
    if *redirect_uri != c.redirect_uri {
        return invalid("redirect_uri is not the one the code was sent to");
    }
    if !pkce_ok(verifier, &c.code_challenge) {
        return invalid("code_verifier does not match the code challenge");
    }
    let Some(who) = oauth::subject(&mut tx, session_id).await? else {
        oauth::code_used(&mut tx, &c.handle_hash, None, now).await?;
        tx.commit().await?;
        return invalid("the sign-in behind this code has ended");
    };
    if who.user_id != user_id {
        return invalid("unknown code");
    }
    let (grant, refresh) = open_grant(
        state,
        &mut tx,
        client,
        &who,
        session_id,
        c.scopes.clone(),
        now,
    )
    .await?;
    oauth::code_used(&mut tx, &c.handle_hash, Some(grant.id), now).await?;
    tx.commit().await?;
    let scope = grant.scopes.join(" ");
    tokens_response(
        state,
        &signer,
        now,
        Issue {
            client,
            grant: &grant,
            who: &who,
            scope: &scope,
            nonce: c.nonce.as_deref(),
            refresh,
        },
    )
}

/// RFC 6749 6: a refresh token, once: it is replaced by a new one of the same
/// grant. A token used a second time (stolen, or replayed) revokes the whole
/// grant: its thief and its owner both must sign in again.
async fn refresh_token(
    state: &AppState,
    req: &HttpRequest,
    mut client: Arc<Authenticating>,
    hot: bool,
    form: &HashMap<String, String>,
) -> ApiResult<HttpResponse> {
    let Some(token) = form.get("refresh_token") else {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "refresh_token is required",
        ));
    };
    let invalid = |why: &str| Ok(oauth_error(400, "invalid_grant", why));
    if token.len() > tokens::MAX_TOKEN_LEN {
        return invalid("unknown refresh token");
    }
    let now = state.clock.now();
    let signer = signer(state, now).await?;
    let hash = tokens::hash(token);
    // The common case by group commit, many refreshes to a statement;
    // anything else (a narrower scope, a reuse, a revoked grant, an ended
    // session) the slow way below.
    if hot {
        let next = tokens::generate(REFRESH_PREFIX).map_err(ApiError::internal)?;
        let ask = oauth::RefreshAsk {
            token_hash: hash.clone(),
            client_id: client.id,
            client_updated_at: client.updated_at,
            at: now,
            next_hash: tokens::hash(&next),
            next_expires_at: now + Duration::seconds(state.oidc.refresh_token_secs),
        };
        if let Some((grant, who)) = state.refreshes.refresh(ask).await? {
            let scope = grant.scopes.join(" ");
            return tokens_response(
                state,
                &signer,
                now,
                Issue {
                    client: &client,
                    grant: &grant,
                    who: &who,
                    scope: &scope,
                    nonce: None,
                    refresh: Some(next),
                },
            );
        }
        // Perhaps the client changed since its copy was taken: the slow way
        // with the client as it is now.
        state.clients.forget(client.id);
        client = match self::client(state, req, form, false, false).await? {
            Ok(c) => c,
            Err(r) => return Ok(r),
        };
    }
    let mut tx = state.pool.begin().await?;
    let Some(r) = oauth::refresh(&mut tx, &hash).await? else {
        return invalid("unknown refresh token");
    };
    if r.grant.client_id != client.id {
        return invalid("unknown refresh token");
    }
    if r.used_at.is_some() {
        if oauth::revoke_grant(&mut tx, r.grant.id, now).await? {
            tx.commit().await?;
            tracing::warn!(client_id = %client.id, grant_id = %r.grant.id, "refresh token reused; its grant is revoked");
        }
        return invalid("the refresh token was already used; its grant is revoked");
    }
    if r.grant_revoked {
        return invalid("the grant was revoked");
    }
    if r.expires_at <= now {
        return invalid("the refresh token has expired");
    }
    let scope = match form.get("scope") {
        Some(asked) => {
            let asked: Vec<&str> = asked.split(' ').filter(|s| !s.is_empty()).collect();
            if let Some(bad) = asked
                .iter()
                .find(|s| !r.grant.scopes.iter().any(|g| g == *s))
            {
                return Ok(oauth_error(
                    400,
                    "invalid_scope",
                    &format!("{bad} was not granted"),
                ));
            }
            asked.join(" ")
        }
        None => r.grant.scopes.join(" "),
    };
    let Some(who) = oauth::subject(&mut tx, r.grant.session_id).await? else {
        return invalid("the sign-in behind this grant has ended");
    };
    oauth::refresh_used(&mut tx, &hash, now).await?;
    let next = new_refresh(state, &mut tx, r.grant.id, now).await?;
    tx.commit().await?;
    tokens_response(
        state,
        &signer,
        now,
        Issue {
            client: &client,
            grant: &r.grant,
            who: &who,
            scope: &scope,
            nonce: None,
            refresh: Some(next),
        },
    )
}

/// A user code as typed: upper case, without separators; None when it cannot
/// be one.
pub(super) fn user_code(typed: &str) -> Option<String> {
    let c: String = typed
        .chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (c.len() == 8 && c.bytes().all(|b| USER_CODE_ALPHABET.contains(&b))).then_some(c)
}

/// POST /oauth/device_authorization (RFC 8628 3.1, 3.2): a device (a
/// command-line tool) asks to sign a person in. It gets a device code to
/// poll the token endpoint with, and a user code for the person to enter at
/// the console (`oidc.device_url`).
#[tracing::instrument(skip_all)]
pub async fn device_authorization(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let (form, c) = match client_request(&state, &req, &body, false).await? {
        Ok(fc) => fc,
        Err(r) => return Ok(r),
    };
    let mut scopes: Vec<String> = Vec::new();
    for one in form
        .get("scope")
        .map(String::as_str)
        .unwrap_or("")
        .split(' ')
        .filter(|x| !x.is_empty())
    {
        if !c.scopes.iter().any(|s| s == one) {
            return Ok(oauth_error(
                400,
                "invalid_scope",
                &format!("{one} is not a scope of this client"),
            ));
        }
        if !scopes.iter().any(|s| s == one) {
            scopes.push(one.to_owned());
        }
    }
    if scopes.is_empty() {
        return Ok(oauth_error(400, "invalid_scope", "scope is required"));
    }
    let now = state.clock.now();
    let device = tokens::generate(DEVICE_PREFIX).map_err(ApiError::internal)?;
    // Draw user codes until one is free (a clash is a one-in-billions event
    // while few requests wait).
    for _ in 0..5 {
        let raw = tokens::random_bytes(8).map_err(ApiError::internal)?;
        let code: String = raw
            .iter()
            .map(|b| USER_CODE_ALPHABET[*b as usize % USER_CODE_ALPHABET.len()] as char)
            .collect();
        let stored = oauth::insert_device(
            &state.pool,
            oauth::NewDevice {
                device_code_hash: tokens::hash(&device),
                user_code_hash: tokens::hash(&code),
                client_id: c.id,
                scopes: &scopes,
                now,
                expires_at: now + Duration::seconds(state.oidc.request_secs),
                interval_secs: state.oidc.device_poll_secs,
            },
        )
        .await?;
        if stored {
            let shown = format!("{}-{}", &code[..4], &code[4..]);
            let mut complete =
                url::Url::parse(&state.oidc.device_url).map_err(ApiError::internal)?;
            complete.query_pairs_mut().append_pair("user_code", &shown);
            return Ok(HttpResponse::Ok()
                .insert_header(("cache-control", "no-store"))
                .json(json!({
                    "device_code": device,
                    "user_code": shown,
                    "verification_uri": state.oidc.device_url,
                    "verification_uri_complete": complete.as_str(),
                    "expires_in": state.oidc.request_secs,
                    "interval": state.oidc.device_poll_secs,
                })));
        }
    }
    Err(ApiError::Unavailable("no free user code; try again".into()))
}

/// RFC 8628 3.4, 3.5: a device polls with its code. Until the person answers:
/// `authorization_pending`, or `slow_down` when it polls faster than its
/// interval (which then grows by 5 seconds); `access_denied` if they refused;
/// `expired_token` after `oidc.request_secs`. Accepted: the tokens, once.
async fn device_code(
    state: &AppState,
    client: &Authenticating,
    form: &HashMap<String, String>,
) -> ApiResult<HttpResponse> {
    let Some(code) = form.get("device_code") else {
        return Ok(oauth_error(
            400,
            "invalid_request",
            "device_code is required",
        ));
    };
    let invalid = |why: &str| Ok(oauth_error(400, "invalid_grant", why));
    if code.len() > tokens::MAX_TOKEN_LEN {
        return invalid("unknown device code");
    }
    let now = state.clock.now();
    let signer = signer(state, now).await?;
    let hash = tokens::hash(code);
    let mut tx = state.pool.begin().await?;
    let Some(d) = oauth::device(&mut tx, &hash).await? else {
        return invalid("unknown device code");
    };
    if d.client_id != client.id {
        return invalid("unknown device code");
    }
    if d.used_at.is_some() {
        return invalid("the device code was already used");
    }
    if d.expires_at <= now {
        return Ok(oauth_error(
            400,
            "expired_token",
            "the device code has expired",
        ));
    }
    let too_soon = d
        .last_poll_at
        .is_some_and(|last| now - last < Duration::seconds(i64::from(d.interval_secs)));
    match d.approved {
        _ if too_soon => {
            let slower = d.interval_secs.saturating_add(5).min(60);
            oauth::device_polled(&mut tx, &hash, now, slower, false).await?;
            tx.commit().await?;
            Ok(oauth_error(
                400,
                "slow_down",
                &format!("poll at most every {slower} seconds"),
            ))
        }
        None => {
            oauth::device_polled(&mut tx, &hash, now, d.interval_secs, false).await?;
            tx.commit().await?;
            Ok(oauth_error(
                400,
                "authorization_pending",
                "the person has not answered yet",
            ))
        }
        Some(false) => {
            oauth::device_polled(&mut tx, &hash, now, d.interval_secs, true).await?;
            tx.commit().await?;
            Ok(oauth_error(400, "access_denied", "the person refused"))
        }
        Some(true) => {
            let (Some(user_id), Some(session_id)) = (d.user_id, d.session_id) else {
                return invalid("unknown device code");
            };
            let Some(who) = oauth::subject(&mut tx, session_id).await? else {
                oauth::device_polled(&mut tx, &hash, now, d.interval_secs, true).await?;
                tx.commit().await?;
                return invalid("the sign-in behind this code has ended");
            };
            if who.user_id != user_id {
                return invalid("unknown device code");
            }
            let (grant, refresh) = open_grant(
                state,
                &mut tx,
                client,
                &who,
                session_id,
                d.scopes.clone(),
                now,
            )
            .await?;
            oauth::device_polled(&mut tx, &hash, now, d.interval_secs, true).await?;
            tx.commit().await?;
            let scope = grant.scopes.join(" ");
            tokens_response(
                state,
                &signer,
                now,
                Issue {
                    client,
                    grant: &grant,
                    who: &who,
                    scope: &scope,
                    nonce: None,
                    refresh,
                },
            )
        }
    }
}

/// An access token of this provider (ES256, `at+jwt`, issued for the hub),
/// verified; `allow_expired` for revocation.
pub(super) async fn verify_access(
    state: &AppState,
    token: &str,
    now: OffsetDateTime,
) -> ApiResult<Option<Value>> {
    let expect = Expect {
        typ: "at+jwt",
        iss: &state.oidc.issuer,
        aud: &state.oidc.issuer,
        now: now.unix_timestamp(),
        allow_expired: false,
    };
    Ok(state
        .oidc_keys
        .verify(&state.pool, now, token, &expect)
        .await
        .map_err(ApiError::internal)?
        .ok())
}

/// Whether a verified access token still stands: its session live (a
/// person's token), its grant not revoked (reuse detection, a replayed code,
/// revocation end the grant's access tokens too).
pub(super) async fn token_live(conn: &mut sqlx::PgConnection, claims: &Value) -> ApiResult<bool> {
    if let Some(gid) = claims["gid"].as_str() {
        let Ok(gid) = Uuid::parse_str(gid) else {
            return Ok(false);
        };
        if !oauth::grant_live(conn, gid).await? {
            return Ok(false);
        }
    }
    if let Some(sid) = sid(claims) {
        if oauth::subject(conn, sid).await?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The session an access token names, when it names one.
pub(super) fn sid(claims: &Value) -> Option<SessionId> {
    claims["sid"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .map(SessionId::from_uuid)
}

/// POST /oauth/introspect (RFC 7662), for confidential clients: whether a
/// token is active now. An access token: its signature, its life and, for a
/// person's, their live session. A refresh token: the client's own, unused,
/// unexpired, its grant and session live. Anything else: `{"active": false}`.
#[tracing::instrument(skip_all)]
pub async fn introspect(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let (form, c) = match client_request(&state, &req, &body, true).await? {
        Ok(fc) => fc,
        Err(r) => return Ok(r),
    };
    let Some(token) = form.get("token") else {
        return Ok(oauth_error(400, "invalid_request", "token is required"));
    };
    let inactive = || {
        HttpResponse::Ok()
            .insert_header(("cache-control", "no-store"))
            .json(json!({"active": false}))
    };
    let now = state.clock.now();
    let mut conn = state.pool.acquire().await?;
    if token.starts_with(REFRESH_PREFIX) {
        if token.len() > tokens::MAX_TOKEN_LEN {
            return Ok(inactive());
        }
        let Some(r) = oauth::refresh(&mut conn, &tokens::hash(token)).await? else {
            return Ok(inactive());
        };
        if r.grant.client_id != c.id
            || r.used_at.is_some()
            || r.grant_revoked
            || r.expires_at <= now
        {
            return Ok(inactive());
        }
        if oauth::subject(&mut conn, r.grant.session_id)
            .await?
            .is_none()
        {
            return Ok(inactive());
        }
        return Ok(HttpResponse::Ok()
            .insert_header(("cache-control", "no-store"))
            .json(json!({
                "active": true,
                "token_type": "refresh_token",
                "client_id": r.grant.client_id,
                "sub": r.grant.user_id,
                "scope": r.grant.scopes.join(" "),
                "exp": r.expires_at.unix_timestamp(),
                "iss": state.oidc.issuer,
            })));
    }
    let Some(claims) = verify_access(&state, token, now).await? else {
        return Ok(inactive());
    };
    if !token_live(&mut conn, &claims).await? {
        return Ok(inactive());
    }
    let mut out = json!({"active": true, "token_type": "Bearer"});
    for k in [
        "iss",
        "sub",
        "aud",
        "client_id",
        "scope",
        "exp",
        "iat",
        "jti",
        "sid",
        "orgs",
        "staff",
    ] {
        if !claims[k].is_null() {
            out[k] = claims[k].clone();
        }
    }
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(out))
}

/// POST /oauth/revoke (RFC 7009): a client revokes its own refresh token,
/// which ends the grant (every token of the family). Access tokens are not
/// revocable one by one: they live `oidc.access_token_secs`, and end with
/// the session they name. 200 whatever the token was (2.2).
#[tracing::instrument(skip_all)]
pub async fn revoke(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let (form, c) = match client_request(&state, &req, &body, false).await? {
        Ok(fc) => fc,
        Err(r) => return Ok(r),
    };
    let Some(token) = form.get("token") else {
        return Ok(oauth_error(400, "invalid_request", "token is required"));
    };
    if token.starts_with(REFRESH_PREFIX) && token.len() <= tokens::MAX_TOKEN_LEN {
        let now = state.clock.now();
        let mut tx = state.pool.begin().await?;
        if let Some(r) = oauth::refresh(&mut tx, &tokens::hash(token)).await? {
            if r.grant.client_id == c.id {
                oauth::revoke_grant(&mut tx, r.grant.id, now).await?;
            }
        }
        tx.commit().await?;
    }
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .finish())
}
