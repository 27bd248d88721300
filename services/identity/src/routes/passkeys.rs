//! Passkeys (WebAuthn): registration by a signed-in person (a recent sign-in
//! or a code), listing, renaming and deleting (session only), and sign-in
//! with one (public): usernameless as the first factor, or as the second
//! factor after a magic link. The ceremonies are webauthn-rs's; a challenge
//! is kept server side and answers once. Rules: proto-docs/accounts.md,
//! "Passkeys".

use crate::{
    audit, fields, mfa,
    passkeys::{self, KeyKind, Kind},
    ratelimit,
    routes::{
        auth::{self, Factors},
        mfa as mfa_routes,
    },
    state::AppState,
    tokens, users,
};
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, SessionCaller},
    ApiError, ApiResult,
};
use uuid::Uuid;
use webauthn_rs::prelude::{
    DiscoverableAuthentication, DiscoverableKey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, WebauthnError,
};

/// A passkey's name: what its owner calls it, at most this many characters.
const NAME_MAX: usize = 64;
const BAD_CHALLENGE: &str = "invalid, expired or already used challenge_id: ask for new options";
/// Every refused sign-in answers this (401): which check failed is not said.
const REFUSED: &str = "passkey not accepted";
const BAD_MFA_TOKEN: &str = "invalid or expired mfa_token";

fn passkey_name(v: &str) -> ApiResult<String> {
    let n = fields::line("name", v, NAME_MAX)?;
    if n.is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    Ok(n)
}

/// A body that must be a JSON object: serde would also read a struct of
/// optional fields from an array (`[null, null]`), which is not this API.
type Object = web::Json<serde_json::Map<String, serde_json::Value>>;

fn fields_of<T: serde::de::DeserializeOwned>(body: Object) -> ApiResult<T> {
    serde_json::from_value(serde_json::Value::Object(body.into_inner()))
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterOptionsBody {
    code: Option<String>,
    recovery_code: Option<String>,
}

/// POST /v1/auth/passkeys/register/options (session): the options of a new
/// passkey's creation (WebAuthn's JSON form) and the id of the challenge
/// they carry. Needs a session opened at most `passkeys.recent_sign_in_secs`
/// ago (with a passkey or a code when the account holds a factor already:
/// [`auth::may_add_factor`]), or a TOTP code (or recovery code) in the body: 403
/// with `reauthenticate: true` otherwise.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn register_options(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: Object,
) -> ApiResult<HttpResponse> {
    let body: RegisterOptionsBody = fields_of(body)?;
    let user_id = caller.user_id();
    let rp = &state.passkeys;
    // A code given is well formed whether or not it is needed (400).
    let proof = match (&body.code, &body.recovery_code) {
        (None, None) => None,
        _ => Some(mfa_routes::proof_of(&body.code, &body.recovery_code)?),
    };
    if !auth::may_add_factor(&state, &caller).await? {
        let Some(proof) = proof else {
            return Ok(auth::reauthenticate());
        };
        // A fresh second factor stands for the recent sign-in (with the
        // code routes' budget, lockout and audit).
        mfa_routes::attempt_allowed(&state, user_id).await?;
        let mut tx = state.pool.begin().await?;
        if let Err(e) = mfa::prove(
            &mut tx,
            state.sealer.as_ref(),
            user_id,
            &proof,
            &state.mfa.lockout(),
            state.clock.now(),
        )
        .await
        {
            let e = match e {
                mfa::Error::NotEnabled => mfa::Error::BadCode,
                e => e,
            };
            let wrong = ApiError::Unprocessable("invalid code".into());
            return mfa_routes::failed(&state, tx, user_id, &caller.ip, e, wrong).await;
        }
        tx.commit().await?;
    }
    let mut tx = state.pool.begin().await?;
    mfa_routes::count_user_hour(&mut tx, &state, "passkey_register", user_id).await?;
    let existing = passkeys::credentials(&mut tx, user_id).await?;
    if existing.len() as i64 >= rp.max_per_user {
        return Err(ApiError::conflict(format!(
            "an account holds at most {} passkeys: delete one first",
            rp.max_per_user
        )));
    }
    let exclude = existing.iter().map(|p| p.cred_id().clone()).collect();
    let email = &caller.identity.email;
    let display = match caller.identity.name.as_str() {
        "" => email.as_str(),
        n => n,
    };
    let (ccr, reg) = rp
        .webauthn
        .start_passkey_registration(user_id.as_uuid(), email, display, Some(exclude))
        .map_err(ApiError::internal)?;
    let mut options = serde_json::to_value(&ccr).map_err(ApiError::internal)?;
    // Usernameless sign-in needs the key to be discoverable (resident):
    // asked for here; webauthn-rs's passkey default leaves it to the device.
    if let Some(sel) = options["publicKey"]["authenticatorSelection"].as_object_mut() {
        sel.insert("residentKey".into(), json!("required"));
        sel.insert("requireResidentKey".into(), json!(true));
    }
    let challenge_id = passkeys::open(
        &mut tx,
        Kind::Register,
        Some(user_id),
        None,
        serde_json::to_value(&reg).map_err(ApiError::internal)?,
        rp.challenge_ttl_secs,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({"challenge_id": challenge_id, "options": options})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterBody {
    challenge_id: Uuid,
    name: String,
    credential: RegisterPublicKeyCredential,
}

/// POST /v1/auth/passkeys/register (session): the browser's new credential
/// for the challenge of `register/options`, kept under `name`. 201 Passkey;
/// a challenge unknown, expired, used or another's: 400; a credential that
/// does not verify (origin, challenge, user verification, signature): 422;
/// one registered already: 409. Audited, and mailed to the account.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn register(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<RegisterBody>,
) -> ApiResult<HttpResponse> {
    let user_id = caller.user_id();
    let name = passkey_name(&body.name)?;
    // Taken for good before anything is checked: a challenge answers once.
    let challenge = {
        let mut conn = state.pool.acquire().await?;
        passkeys::take(&mut conn, body.challenge_id, Kind::Register).await?
    };
    let Some(challenge) = challenge.filter(|c| c.user_id == Some(user_id)) else {
        return Err(ApiError::bad_request(BAD_CHALLENGE));
    };
    let reg: PasskeyRegistration =
        serde_json::from_value(challenge.state).map_err(ApiError::internal)?;
    let passkey = match state
        .passkeys
        .webauthn
        .finish_passkey_registration(&body.credential, &reg)
    {
        Ok(p) => p,
        Err(e) => {
            tracing::info!(error = %e, "a passkey registration did not verify");
            return Err(ApiError::Unprocessable(format!(
                "the passkey did not verify ({e})"
            )));
        }
    };
    let mut tx = state.pool.begin().await?;
    // One registration at a time per person (the count below holds).
    users::lock_name(&mut tx, user_id).await?;
    if passkeys::count(&mut tx, user_id).await? >= state.passkeys.max_per_user {
        return Err(ApiError::conflict("too many passkeys: delete one first"));
    }
    let Some(view) = passkeys::insert(&mut tx, user_id, &name, &passkey)
        .await
        .map_err(ApiError::internal)?
    else {
        return Err(ApiError::conflict("this passkey is registered already"));
    };
    audit::record(
        &mut tx,
        Some(user_id),
        AuditAction::PasskeyAdded,
        &format!("passkey:{}", view.id),
        json!({"backup_eligible": view.backup_eligible}),
        &caller.ip,
    )
    .await?;
    if let Some(m) = &state.mailer {
        m.enqueue_passkey_added(&mut tx, &caller.identity.email, &view.name)
            .await
            .map_err(ApiError::internal)?;
    }
    tx.commit().await?;
    if let Some(m) = &state.mailer {
        m.kick();
    }
    Ok(HttpResponse::Created().json(view))
}

/// GET /v1/auth/passkeys (session): the caller's passkeys, newest first.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn list(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let mut conn = state.pool.acquire().await?;
    Ok(HttpResponse::Ok().json(passkeys::list(&mut conn, caller.user_id()).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameBody {
    name: String,
}

/// PATCH /v1/auth/passkeys/{id} (session): a new name; 404 unless the
/// caller's.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn rename(
    state: web::Data<AppState>,
    caller: SessionCaller,
    path: web::Path<Uuid>,
    body: web::Json<RenameBody>,
) -> ApiResult<HttpResponse> {
    let name = passkey_name(&body.name)?;
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    let view = passkeys::rename(&mut tx, caller.user_id(), id, &name)
        .await?
        .ok_or(ApiError::NotFound)?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        AuditAction::PasskeyRenamed,
        &format!("passkey:{id}"),
        json!({}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(view))
}

/// DELETE /v1/auth/passkeys/{id} (session): 404 unless the caller's; 409
/// when it is the last factor of a staff member who must have MFA
/// (`mfa.staff_required`, no TOTP on, no other passkey). The sessions the
/// passkey opened end (but the caller's); the account is mailed.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: SessionCaller,
    path: web::Path<Uuid>,
) -> ApiResult<HttpResponse> {
    let user_id = caller.user_id();
    let id = path.into_inner();
    let mut tx = state.pool.begin().await?;
    // The person's row is the lock: two deletes of the last two passkeys
    // are counted one after the other.
    users::lock_name(&mut tx, user_id).await?;
    let Some(name) = passkeys::delete(&mut tx, user_id, id).await? else {
        return Err(ApiError::NotFound);
    };
    if state.mfa.staff_required
        && passkeys::count(&mut tx, user_id).await? == 0
        && !mfa::is_enabled(&mut tx, user_id).await?
        && (state.is_staff(&caller.identity.email)
            || passkeys::staff_granted(&mut tx, user_id).await?)
    {
        // Rolled back: the passkey stays.
        return Err(ApiError::conflict(
            "this is your only second factor and staff must have one: add another passkey \
             or turn on two-factor codes first",
        ));
    }
    // What the passkey opened ends with it (a lost or stolen key's sessions,
    // and the OAuth grants that depend on them), but the session deleting it.
    let current = hub_domain::SessionId::from_uuid(caller.session_id());
    let revoked = crate::sessions::revoke_opened_with(&mut tx, user_id, id, current).await?;
    crate::sessions::enqueue_revoked(&mut tx, &state.naming, user_id, &revoked)
        .await
        .map_err(ApiError::internal)?;
    audit::record(
        &mut tx,
        Some(user_id),
        AuditAction::PasskeyDeleted,
        &format!("passkey:{id}"),
        json!({"sessions_revoked": revoked.len()}),
        &caller.ip,
    )
    .await?;
    if let Some(m) = &state.mailer {
        m.enqueue_passkey_removed(&mut tx, &caller.identity.email, &name)
            .await
            .map_err(ApiError::internal)?;
    }
    tx.commit().await?;
    if let Some(m) = &state.mailer {
        m.kick();
    }
    let mut resp = HttpResponse::Ok();
    if !revoked.is_empty() {
        // Gateways drop the revoked sessions when the events arrive: sent
        // before answering, as a logout's.
        state.publish_now().await;
        resp.insert_header(service_kit::http::identity_changed(user_id));
    }
    Ok(resp.json(json!({"status": "deleted", "sessions_revoked": revoked.len()})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginOptionsBody {
    mfa_token: Option<String>,
}

/// The mfa_token's hash when it is well formed (401 otherwise).
fn mfa_hash(token: &str) -> ApiResult<Vec<u8>> {
    if token.is_empty() || token.len() > tokens::MAX_TOKEN_LEN {
        return Err(ApiError::unauthorized(BAD_MFA_TOKEN));
    }
    Ok(tokens::hash(token))
}

/// POST /v1/auth/passkeys/login/options (public): a sign-in's options
/// (WebAuthn's JSON form) and its challenge's id. Without a body's
/// `mfa_token`: usernameless (any of this site's passkeys; `mediation:
/// conditional` for the browser's autofill); with one (the second step after
/// a magic link): that user's passkeys only, 409 when they have none. At most
/// `auth.verify_per_ip_per_minute` per client IP (a bucket of its own).
#[tracing::instrument(skip_all)]
pub async fn login_options(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    body: Object,
) -> ApiResult<HttpResponse> {
    let body: LoginOptionsBody = fields_of(body)?;
    // A bucket of its own, as large as verify's: the sign-in page asks for
    // options at every view (the autofill), which proves nothing and should
    // not spend the budget of the attempts that do.
    let max = state.auth.verify_per_ip_per_minute;
    let now = state.clock.now();
    if !ratelimit::allow_ip_per_minute(&state.pool, now, "passkey_options", ctx.ip(), max).await? {
        return Err(ApiError::TooManyRequests);
    }
    let rp = &state.passkeys;
    let mut tx = state.pool.begin().await?;
    let (options, challenge_id) = match &body.mfa_token {
        None => {
            let (rcr, st) = rp
                .webauthn
                .start_discoverable_authentication()
                .map_err(ApiError::internal)?;
            let st = serde_json::to_value(&st).map_err(ApiError::internal)?;
            let id =
                passkeys::open(&mut tx, Kind::Login, None, None, st, rp.challenge_ttl_secs).await?;
            (rcr, id)
        }
        Some(token) => {
            let hash = mfa_hash(token)?;
            let Some(user_id) = mfa::lock_challenge(&mut tx, &hash, state.mfa.max_attempts).await?
            else {
                return Err(ApiError::unauthorized(BAD_MFA_TOKEN));
            };
            let creds = passkeys::credentials(&mut tx, user_id).await?;
            if creds.is_empty() {
                return Err(ApiError::conflict(
                    "this account has no passkey: use a code",
                ));
            }
            let (rcr, st) = rp
                .webauthn
                .start_passkey_authentication(&creds)
                .map_err(ApiError::internal)?;
            let st = serde_json::to_value(&st).map_err(ApiError::internal)?;
            let id = passkeys::open(
                &mut tx,
                Kind::Mfa,
                Some(user_id),
                Some(&hash),
                st,
                rp.challenge_ttl_secs,
            )
            .await?;
            (rcr, id)
        }
    };
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({"challenge_id": challenge_id, "options": options})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    challenge_id: Uuid,
    credential: PublicKeyCredential,
    mfa_token: Option<String>,
}

/// POST /v1/auth/passkeys/login (public): the browser's assertion for the
/// challenge of `login/options` opens a session, answered as `POST
/// /v1/auth/verify` answers (`{session_token}`). The session counts as
/// opened through MFA (the authenticator verified the person). Anything
/// wrong (the challenge, the origin, the signature, a passkey deleted or
/// another's, a signature counter gone back: audited) answers the same 401.
/// Counts against the client IP with verify's attempts and against the
/// user's hourly budget.
#[tracing::instrument(skip_all)]
pub async fn login(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    body: web::Json<LoginBody>,
) -> ApiResult<HttpResponse> {
    if !auth::verify_allowed(&state, ctx.ip()).await? {
        return Err(ApiError::TooManyRequests);
    }
    let refused = || ApiError::unauthorized(REFUSED);
    let kind = match body.mfa_token {
        Some(_) => Kind::Mfa,
        None => Kind::Login,
    };
    let mfa_hash = body.mfa_token.as_deref().map(mfa_hash).transpose()?;
    // Taken for good before anything is checked: a challenge answers once.
    let challenge = {
        let mut conn = state.pool.acquire().await?;
        passkeys::take(&mut conn, body.challenge_id, kind).await?
    };
    let Some(challenge) = challenge else {
        return Err(refused());
    };
    let cred = &body.credential;
    let mut tx = state.pool.begin().await?;
    let Some(stored) = passkeys::lock_by_credential(&mut tx, cred.get_credential_id())
        .await
        .map_err(ApiError::internal)?
    else {
        return Err(refused());
    };
    let user_id = stored.user_id;
    let webauthn = &state.passkeys.webauthn;
    let result = match kind {
        Kind::Login => {
            // The user handle the authenticator returned names the account
            // the key was made for: it must be the key's owner here.
            match webauthn.identify_discoverable_authentication(cred) {
                Ok((handle, _)) if handle == user_id.as_uuid() => {}
                _ => return Err(refused()),
            }
            // Per person and address: a stranger who knows a credential id
            // and its user spends their own address's budget, not the
            // person's.
            let kind = format!("passkey:ip:{}", ratelimit::ip_key(ctx.ip()));
            mfa_routes::count_user_hour(&mut tx, &state, &kind, user_id).await?;
            let st: DiscoverableAuthentication =
                serde_json::from_value(challenge.state).map_err(ApiError::internal)?;
            webauthn.finish_discoverable_authentication(
                cred,
                st,
                &[DiscoverableKey::from(&stored.passkey)],
            )
        }
        Kind::Mfa | Kind::Register => {
            let (Some(hash), Some(want)) = (&mfa_hash, &challenge.mfa_token_hash) else {
                return Err(refused());
            };
            // The challenge is the mfa_token's, the token still live, the
            // key its user's.
            if !service_kit::same_secret(hash, want)
                || challenge.user_id != Some(user_id)
                || mfa::lock_challenge(&mut tx, hash, state.mfa.max_attempts).await?
                    != Some(user_id)
            {
                return Err(refused());
            }
            mfa_routes::count_attempt(&mut tx, &state, user_id).await?;
            let st: PasskeyAuthentication =
                serde_json::from_value(challenge.state).map_err(ApiError::internal)?;
            webauthn.finish_passkey_authentication(cred, &st)
        }
    };
    let result = match result {
        Ok(r) if r.user_verified() => r,
        Ok(_) => {
            tx.commit().await?;
            return Err(refused());
        }
        Err(e) => {
            tracing::info!(error = %e, "a passkey sign-in did not verify");
            if matches!(e, WebauthnError::CredentialPossibleCompromise) {
                // A counter that went back: a cloned authenticator, or a
                // replayed assertion. Kept for the account's history.
                audit::record(
                    &mut tx,
                    Some(user_id),
                    AuditAction::PasskeyRefused,
                    &format!("passkey:{}", stored.id),
                    json!({"reason": "counter_regressed"}),
                    ctx.ip(),
                )
                .await?;
            }
            if let Some(hash) = &mfa_hash {
                mfa::challenge_failed(&mut tx, hash).await?;
                audit::record(
                    &mut tx,
                    Some(user_id),
                    AuditAction::MfaFailed,
                    &format!("user:{user_id}"),
                    json!({"method": "passkey"}),
                    ctx.ip(),
                )
                .await?;
            }
            tx.commit().await?;
            return Err(refused());
        }
    };
    let mut passkey = stored.passkey;
    passkey.update_credential(&result);
    passkeys::used(&mut tx, stored.id, &passkey)
        .await
        .map_err(ApiError::internal)?;
    let key = KeyKind::of(&passkey);
    let factors = match &mfa_hash {
        Some(hash) => {
            mfa::challenge_used(&mut tx, hash).await?;
            Factors::LinkThenPasskey(key, stored.id)
        }
        None => Factors::Passkey(key, stored.id),
    };
    let session_token = auth::open_session(&mut tx, &state, user_id, ctx.ip(), factors).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({ "session_token": session_token })))
}
