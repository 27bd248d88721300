//! Magic-link sign-in, identity resolution, sessions.

use crate::{
    admin_users, audit, mfa,
    ratelimit::{self, Limit},
    resolve, sessions,
    state::AppState,
    tokens, users,
};
use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use event_contracts::IdentityChanged;
use hub_domain::{Credential, Email, Identity, SessionId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, SessionCaller},
    http::identity_changed,
    outbox, ApiError, ApiResult,
};

/// Response headers that tell the gateway which credential a bearer is.
pub const CREDENTIAL_KIND_HEADER: &str = "x-hub-credential-kind";
pub const CREDENTIAL_ID_HEADER: &str = "x-hub-credential-id";
/// Unix seconds after which the credential is no longer valid (caches stop there).
pub const CREDENTIAL_EXPIRES_HEADER: &str = "x-hub-credential-expires";
/// On a 401 from `/v1/auth/me`: the bearer was looked up and refused (the
/// gateway may remember that; any other 401 is about the gateway's assertion).
pub const CREDENTIAL_REFUSED_HEADER: &str = "x-hub-credential-refused";

fn refused() -> HttpResponse {
    let mut resp = actix_web::ResponseError::error_response(&ApiError::unauthorized(
        "invalid or expired credential",
    ));
    resp.headers_mut().insert(
        header::HeaderName::from_static(CREDENTIAL_REFUSED_HEADER),
        header::HeaderValue::from_static("1"),
    );
    resp
}

#[derive(Deserialize)]
pub struct RequestLink {
    email: String,
}

#[derive(Serialize)]
struct LinkSent {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dev_token: Option<String>,
}

/// POST /v1/auth/request-link: the same answer whether or not the account
/// existed; 429 (one body for both limits) when the email or the IP is over.
#[tracing::instrument(skip_all)]
pub async fn request_link(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    body: web::Json<RequestLink>,
) -> ApiResult<HttpResponse> {
    let email = Email::parse(&body.email).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let token = tokens::generate("mlt_")?;
    let a = &state.auth;

    let mut tx = state.pool.begin().await?;
    if !link_allowed(&mut tx, &state, &email, ctx.ip()).await? {
        tx.rollback().await?;
        return Err(ApiError::TooManyRequests);
    }
    let user_id = users::upsert_by_email(&mut tx, &email).await?;
    // A disabled user gets no link, and the answer does not say so (it
    // would tell anyone whether an address is disabled).
    if admin_users::is_disabled(&mut tx, user_id).await? {
        tx.commit().await?;
        return Ok(HttpResponse::Ok().json(LinkSent {
            status: "sent",
            dev_token: None,
        }));
    }
    sessions::issue_link(
        &mut tx,
        tokens::hash(&token),
        user_id,
        a.magic_link_ttl_secs as f64,
    )
    .await?;
    // The mail goes out after the commit, from the mail queue (the token
    // sealed in it): a slow or dead SMTP server never holds this answer.
    if let Some(m) = &state.mailer {
        m.enqueue_magic_link(&mut tx, email.as_str(), &token)
            .await?;
    }
    tx.commit().await?;
    if let Some(m) = &state.mailer {
        m.kick();
    }

    // The token itself is echoed only on deployments configured to do so.
    Ok(HttpResponse::Ok().json(LinkSent {
        status: "sent",
        dev_token: a.echo_dev_token.then_some(token),
    }))
}

/// Count a link request against `email` and `ip` (per hour each); whether
/// both are still under their limits.
async fn link_allowed(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    email: &Email,
    ip: &str,
) -> ApiResult<bool> {
    let a = &state.auth;
    let email_bucket = format!("link:email:{email}");
    let ip_bucket = format!("link:ip:{}", ratelimit::ip_key(ip));
    Ok(ratelimit::check_and_record(
        tx,
        state.clock.now(),
        &[
            Limit {
                bucket: &email_bucket,
                max: a.request_link_per_email_per_hour,
                window_secs: 3600,
            },
            Limit {
                bucket: &ip_bucket,
                max: a.request_link_per_ip_per_hour,
                window_secs: 3600,
            },
        ],
    )
    .await?)
}

#[derive(Deserialize)]
pub struct VerifyBody {
    token: String,
}

const BAD_LINK: &str = "invalid, expired or already used token";

impl From<sessions::Error> for ApiError {
    #[track_caller]
    fn from(e: sessions::Error) -> Self {
        match e {
            sessions::Error::UnusableLink => ApiError::unauthorized(BAD_LINK),
            sessions::Error::NotFound => ApiError::NotFound,
            sessions::Error::Db(e) => ApiError::from(e),
        }
    }
}

/// POST /v1/auth/verify: exchange an unused, unexpired magic-link token for a
/// session. The redeeming UPDATE locks the row, so of concurrent verifies of
/// one token exactly one sees it unused. A user with MFA on gets
/// `{mfa_required: true, mfa_token}` instead (no session yet): the token and a
/// code go to `POST /v1/auth/mfa/verify`.
#[tracing::instrument(skip_all)]
pub async fn verify(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    body: web::Json<VerifyBody>,
) -> ApiResult<HttpResponse> {
    // Every attempt counts against the IP, failed ones included.
    if !verify_allowed(&state, ctx.ip()).await? {
        return Err(ApiError::TooManyRequests);
    }
    if body.token.is_empty() || body.token.len() > tokens::MAX_TOKEN_LEN {
        return Err(ApiError::unauthorized(BAD_LINK));
    }

    let mut tx = state.pool.begin().await?;
    let user_id = sessions::redeem_link(&mut tx, tokens::hash(&body.token)).await?;
    if mfa::is_enabled(&mut tx, user_id).await? {
        let mfa_token = tokens::generate("mfa_")?;
        mfa::open_challenge(
            &mut tx,
            tokens::hash(&mfa_token),
            user_id,
            state.mfa.challenge_ttl_secs as f64,
        )
        .await?;
        // The second factors this user can show: a code always, a passkey
        // when they hold one (POST /v1/auth/passkeys/login with the token).
        let methods = if crate::passkeys::count(&mut tx, user_id).await? > 0 {
            json!(["totp", "passkey"])
        } else {
            json!(["totp"])
        };
        tx.commit().await?;
        return Ok(HttpResponse::Ok().json(json!({
            "mfa_required": true,
            "mfa_token": mfa_token,
            "methods": methods,
        })));
    }
    let session_token = open_session(&mut tx, &state, user_id, ctx.ip(), Factors::Link).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({ "session_token": session_token })))
}

/// How a sign-in proved who it is (kept with the session: `mfa` and the
/// OpenID Provider's `amr`, RFC 8176).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Factors {
    /// A magic link alone.
    Link,
    /// A magic link, then a TOTP code (`totp`) or a recovery code
    /// (`recovery_code`).
    LinkThenCode(&'static str),
    /// A magic link, then a passkey (its kind and id).
    LinkThenPasskey(crate::passkeys::KeyKind, uuid::Uuid),
    /// A passkey alone (its kind and id), the authenticator having verified
    /// the person (PIN or biometrics): possession and a second factor in one
    /// ceremony.
    Passkey(crate::passkeys::KeyKind, uuid::Uuid),
}

impl Factors {
    /// Whether the session counts as opened through MFA.
    pub(crate) fn mfa(self) -> bool {
        !matches!(self, Factors::Link)
    }

    /// The RFC 8176 values: `email` (the link), `otp` (a code), `hwk` or
    /// `swk` (a passkey its authenticator says is bound to its device, or one
    /// that may be synced) with `user` (RFC 8176's user presence, the nearest
    /// value: the authenticator verified the person, which implies it), `mfa`
    /// (two factors).
    pub(crate) fn amr(self) -> Vec<String> {
        let v: &[&str] = match self {
            Factors::Link => &["email"],
            Factors::LinkThenCode(_) => &["email", "otp", "mfa"],
            Factors::LinkThenPasskey(k, _) => &["email", k.amr(), "user", "mfa"],
            Factors::Passkey(k, _) => &[k.amr(), "user", "mfa"],
        };
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The sign-in's audit detail.
    fn audit(self) -> serde_json::Value {
        match self {
            Factors::Link => json!({"method": "magic_link"}),
            Factors::LinkThenCode(f) => json!({"method": "magic_link", "second_factor": f}),
            Factors::LinkThenPasskey(_, id) => {
                json!({"method": "magic_link", "second_factor": "passkey", "passkey_id": id})
            }
            Factors::Passkey(_, id) => json!({"method": "passkey", "passkey_id": id}),
        }
    }

    /// The passkey shown, if one was.
    fn passkey(self) -> Option<uuid::Uuid> {
        match self {
            Factors::LinkThenPasskey(_, id) | Factors::Passkey(_, id) => Some(id),
            Factors::Link | Factors::LinkThenCode(_) => None,
        }
    }
}

/// Open a session for `user_id` and audit the sign-in (caller's transaction);
/// `factors`: how the person proved who they are. Returns the session token.
pub(crate) async fn open_session(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    user_id: UserId,
    ip: &str,
    factors: Factors,
) -> ApiResult<String> {
    // A link or challenge issued before staff disabled the user opens nothing.
    if admin_users::is_disabled(&mut *tx, user_id).await? {
        return Err(ApiError::forbidden(
            "this account is disabled: contact support",
        ));
    }
    let session_token = tokens::generate("sess_")?;
    let session_id = SessionId::new();
    sessions::open(
        &mut *tx,
        sessions::NewSession {
            id: session_id,
            user_id,
            token_hash: tokens::hash(&session_token),
            ip,
            ttl_secs: state.auth.session_ttl_secs as f64,
            mfa: factors.mfa(),
            amr: factors.amr(),
            passkey_id: factors.passkey(),
        },
    )
    .await?;
    audit::record(
        tx,
        Some(user_id),
        event_contracts::AuditAction::SignIn,
        &format!("session:{session_id}"),
        factors.audit(),
        ip,
    )
    .await?;
    Ok(session_token)
}

/// 403 for a session that may not add a factor as it is: too old, or (the
/// account holding a factor already) not opened with one.
pub(crate) fn reauthenticate() -> HttpResponse {
    HttpResponse::build(StatusCode::FORBIDDEN).json(json!({
        "error": "adding a second factor needs a recent sign-in, with your passkey or code \
                  when you have one: sign in again, or send a code (code or recovery_code)",
        "reauthenticate": true,
    }))
}

/// Whether `caller`'s session may add a factor without showing one now: it
/// is recent, and when the account holds a factor already (TOTP on, or a
/// passkey) it was opened with one. A mailbox alone (a magic link) never
/// adds a factor to an account that has one: it would turn a stolen inbox
/// into a lasting second factor (and staff powers).
pub(crate) async fn may_add_factor(state: &AppState, caller: &SessionCaller) -> ApiResult<bool> {
    let mut conn = state.pool.acquire().await?;
    let user_id = caller.user_id();
    let opened = crate::passkeys::session_opened(
        &mut conn,
        caller.session_id(),
        state.passkeys.recent_sign_in_secs,
    )
    .await?;
    if !opened.recent {
        return Ok(false);
    }
    if opened.mfa {
        return Ok(true);
    }
    let has_factor = mfa::is_enabled(&mut conn, user_id).await?
        || crate::passkeys::count(&mut conn, user_id).await? > 0;
    Ok(!has_factor)
}

/// Count a verify attempt against `ip` (per minute, committed at once: failed
/// attempts count too); whether it is still under its limit. The second
/// factor's attempts (`POST /v1/auth/mfa/verify`) count here too.
pub(crate) async fn verify_allowed(state: &AppState, ip: &str) -> ApiResult<bool> {
    let max = state.auth.verify_per_ip_per_minute;
    Ok(ratelimit::allow_ip_per_minute(&state.pool, state.clock.now(), "verify", ip, max).await?)
}

fn bearer(req: &HttpRequest) -> Option<&str> {
    let v = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn identity_response(identity: &Identity, cred: Credential) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CREDENTIAL_KIND_HEADER, cred.kind.as_str()))
        .insert_header((CREDENTIAL_ID_HEADER, cred.id.to_string()))
        .json(identity)
}

/// GET /v1/auth/me: the gateway's resolution call (anonymous assertion plus the
/// caller's bearer) and, if ever routed here, an already-resolved caller.
#[tracing::instrument(skip_all)]
pub async fn me(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    if let (Some(identity), Some(cred)) = (&ctx.0.identity, ctx.0.credential) {
        return Ok(identity_response(identity, cred));
    }
    let token = bearer(&req).ok_or_else(|| ApiError::unauthorized("missing bearer token"))?;
    let is_staff = |e: &str, granted, mfa| state.is_staff_session(e, granted, mfa);
    let resolved = if resolve::looks_like_jwt(token) {
        // The OpenID Provider's access token: verified here (ES256, a
        // published key, at+jwt, this issuer, unexpired), then its session.
        let now = state.clock.now();
        let expect = service_kit::jwt::Expect {
            typ: "at+jwt",
            iss: &state.oidc.issuer,
            aud: &state.oidc.issuer,
            now: now.unix_timestamp(),
            allow_expired: false,
        };
        match state
            .oidc_keys
            .verify(&state.pool, now, token, &expect)
            .await
            .map_err(ApiError::internal)?
        {
            Ok(claims) => resolve::access_token(&state.pool, &claims, is_staff).await?,
            Err(_) => None,
        }
    } else if token.is_empty() || token.len() > tokens::MAX_TOKEN_LEN {
        return Ok(refused());
    } else {
        resolve::bearer(&state.pool, token, is_staff).await?
    };
    match resolved {
        Some(r) => {
            let mut resp = identity_response(&r.identity, r.credential);
            if let Ok(v) = header::HeaderValue::from_str(&r.expires_at.unix_timestamp().to_string())
            {
                resp.headers_mut().insert(
                    header::HeaderName::from_static(CREDENTIAL_EXPIRES_HEADER),
                    v,
                );
            }
            Ok(resp)
        }
        None => Ok(refused()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchMe {
    name: String,
}

/// PATCH /v1/auth/me: change the display name (at most 120 characters).
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn patch_me(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<PatchMe>,
) -> ApiResult<HttpResponse> {
    let name = crate::fields::name(&body.name)?;
    let mut tx = state.pool.begin().await?;
    let old = users::lock_name(&mut tx, caller.user_id()).await?;
    if old != name {
        users::set_name(&mut tx, caller.user_id(), &name).await?;
        // The changed field's name, never its value (as the profile route):
        // audit rows outlive edits, and audit detail holds no personal data.
        audit::record(
            &mut tx,
            Some(caller.user_id()),
            event_contracts::AuditAction::NameChanged,
            &format!("user:{}", caller.user_id()),
            json!({"fields": ["name"]}),
            &caller.ip,
        )
        .await?;
        outbox::enqueue(
            &mut tx,
            &state.naming,
            IdentityChanged {
                user_id: caller.user_id(),
            },
        )
        .await?;
    }
    tx.commit().await?;
    state.publish_now().await;
    let mut identity = caller.identity.clone();
    identity.name = name;
    let mut resp = identity_response(&identity, caller.credential);
    let (h, v) = identity_changed(caller.user_id());
    if let Ok(v) = header::HeaderValue::from_str(&v) {
        resp.headers_mut()
            .insert(header::HeaderName::from_static(h), v);
    }
    Ok(resp)
}

/// Revoke one session of `user_id` (or fail with 404) and announce it.
pub(crate) async fn revoke(
    state: &AppState,
    user_id: UserId,
    session_id: SessionId,
    action: event_contracts::AuditAction,
    ip: &str,
) -> ApiResult<()> {
    let mut tx = state.pool.begin().await?;
    let hash = sessions::revoke(&mut tx, session_id, user_id).await?;
    audit::record(
        &mut tx,
        Some(user_id),
        action,
        &format!("session:{session_id}"),
        json!({}),
        ip,
    )
    .await?;
    sessions::enqueue_revoked(&mut tx, &state.naming, user_id, &[(session_id, hash)]).await?;
    tx.commit().await?;
    // Gateways drop their cached identity when this event arrives: send it
    // before answering so that the revocation holds everywhere at once.
    state.publish_now().await;
    Ok(())
}

/// POST /v1/auth/logout: revoke the caller's current session.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn logout(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    revoke(
        &state,
        caller.user_id(),
        SessionId::from_uuid(caller.session_id()),
        event_contracts::AuditAction::Logout,
        &caller.ip,
    )
    .await?;
    Ok(HttpResponse::Ok()
        .insert_header(identity_changed(caller.user_id()))
        .json(json!({"status": "logged_out"})))
}

/// GET /v1/auth/sessions: the caller's active sessions, newest first.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn list_sessions(
    state: web::Data<AppState>,
    caller: SessionCaller,
) -> ApiResult<HttpResponse> {
    let mut rows = sessions::active(&state.pool, caller.user_id()).await?;
    for r in &mut rows {
        r.current = r.id == SessionId::from_uuid(caller.session_id());
    }
    Ok(HttpResponse::Ok().json(rows))
}

/// DELETE /v1/auth/sessions/{id}: revoke one of the caller's sessions; 404 for
/// anything else (unknown, someone else's, already revoked).
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn revoke_session(
    state: web::Data<AppState>,
    caller: SessionCaller,
    path: web::Path<SessionId>,
) -> ApiResult<HttpResponse> {
    revoke(
        &state,
        caller.user_id(),
        path.into_inner(),
        event_contracts::AuditAction::SessionRevoked,
        &caller.ip,
    )
    .await?;
    Ok(HttpResponse::Ok()
        .insert_header(identity_changed(caller.user_id()))
        .json(json!({"status": "revoked"})))
}
