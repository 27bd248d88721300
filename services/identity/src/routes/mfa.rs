//! The second factor (TOTP): status, enrollment, confirmation, disabling (all
//! by session), and the sign-in step that turns an `mfa_token` and a code into
//! a session (public). Rules: proto-docs/accounts.md, "MFA".

use crate::{
    audit, mfa,
    ratelimit::{self, Limit},
    routes::auth,
    state::AppState,
    tokens,
};
use actix_web::{
    http::{header, StatusCode},
    web, HttpResponse,
};
use event_contracts::AuditAction;
use hub_domain::{SessionId, UserId};
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, SessionCaller},
    error::json_error,
    http::identity_changed,
    ApiError, ApiResult,
};

const BAD_CODE: &str = "invalid code";
const BAD_CHALLENGE: &str = "invalid or expired mfa_token, or invalid code";

impl From<mfa::Error> for ApiError {
    #[track_caller]
    fn from(e: mfa::Error) -> Self {
        match e {
            mfa::Error::AlreadyEnabled => ApiError::conflict("MFA is already enabled"),
            mfa::Error::NotEnrolled => {
                ApiError::conflict("no MFA enrollment to confirm: enroll first")
            }
            mfa::Error::NotEnabled => ApiError::conflict("MFA is not enabled"),
            mfa::Error::BadCode => ApiError::Unprocessable(BAD_CODE.into()),
            mfa::Error::NoSealer => ApiError::Unavailable(
                "MFA is not available on this deployment (no sealing key)".into(),
            ),
            // Answered by `failed` (429 with Retry-After); never reached.
            mfa::Error::LockedOut { .. } | mfa::Error::LockoutStarted { .. } => {
                ApiError::TooManyRequests
            }
            mfa::Error::Db(e) => ApiError::from(e),
            mfa::Error::Other(e) => ApiError::internal(e),
        }
    }
}

/// GET /v1/auth/mfa: whether MFA is on (session only).
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn status(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(mfa::status(&state.pool, caller.user_id()).await?))
}

/// POST /v1/auth/mfa/enroll: a new secret, shown once (session only). Enrolling
/// again before confirming replaces the pending secret; with MFA on: 409. An
/// account holding a passkey enrolls from a recent session opened with it
/// (403 with `reauthenticate` otherwise): a mailed link alone adds no factor.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn enroll(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
    let holds_passkey = {
        let mut conn = state.pool.acquire().await?;
        crate::passkeys::count(&mut conn, caller.user_id()).await? > 0
    };
    if holds_passkey && !auth::may_add_factor(&state, &caller).await? {
        return Ok(auth::reauthenticate());
    }
    let mut tx = state.pool.begin().await?;
    let enrollment = mfa::enroll(
        &mut tx,
        state.sealer.as_ref(),
        caller.user_id(),
        &caller.identity.email,
        &state.mfa.issuer,
    )
    .await?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        AuditAction::MfaEnrolled,
        &format!("user:{}", caller.user_id()),
        json!({}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(enrollment))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmBody {
    code: String,
    /// Revoke every other session of the user (the current one stays).
    #[serde(default)]
    sign_out_other_sessions: bool,
}

/// 429 while the user's codes are locked out, with `Retry-After`.
pub(super) fn locked_out(secs: i64) -> HttpResponse {
    let mut resp = json_error(
        StatusCode::TOO_MANY_REQUESTS,
        &format!("too many wrong codes: code entry is locked for {secs} more seconds"),
    );
    if let Ok(v) = header::HeaderValue::from_str(&secs.to_string()) {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// How a code step that did not pass ends, in `tx`: a wrong code is counted
/// (committed, with `record` run first: audit, the challenge's own count);
/// one that began a lockout also queues the notice to the account's address;
/// a running lockout is 429 with `Retry-After`. `wrong` is the answer to a
/// plain wrong code; any other error rolls back.
pub(super) async fn failed(
    state: &AppState,
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    user_id: UserId,
    ip: &str,
    e: mfa::Error,
    wrong: ApiError,
) -> ApiResult<HttpResponse> {
    let lockout = match e {
        mfa::Error::LockedOut { retry_after_secs } => return Ok(locked_out(retry_after_secs)),
        mfa::Error::BadCode => None,
        mfa::Error::LockoutStarted { lockout_secs } => Some(lockout_secs),
        e => return Err(e.into()),
    };
    if let Some(secs) = lockout {
        audit::record(
            &mut tx,
            Some(user_id),
            AuditAction::MfaFailed,
            &format!("user:{user_id}"),
            json!({"lockout_secs": secs}),
            ip,
        )
        .await?;
        match &state.mailer {
            Some(m) => {
                let email = mfa::email_of(&mut tx, user_id).await?;
                m.enqueue_mfa_lockout(&mut tx, &email, secs)
                    .await
                    .map_err(ApiError::internal)?;
            }
            None => tracing::warn!(%user_id, "MFA lockout: no mail server, the user is not told"),
        }
    }
    tx.commit().await?;
    match lockout {
        Some(secs) => {
            if let Some(m) = &state.mailer {
                m.kick();
            }
            Ok(locked_out(secs))
        }
        None => Err(wrong),
    }
}

/// A code as the body gives it: six digits (400 otherwise).
fn code_of(code: &str) -> ApiResult<&str> {
    if mfa::well_formed(code) {
        Ok(code)
    } else {
        Err(ApiError::bad_request("code must be 6 digits"))
    }
}

/// Count an attempt of `user_id` against its hourly budget
/// (`mfa.attempts_per_user_per_hour`) in bucket `<kind>:user:<id>`, in
/// `conn`'s transaction; 429 over it.
pub(super) async fn count_user_hour(
    conn: &mut sqlx::PgConnection,
    state: &AppState,
    kind: &str,
    user_id: UserId,
) -> ApiResult<()> {
    let bucket = format!("{kind}:user:{user_id}");
    let within = ratelimit::check_and_record(
        conn,
        state.clock.now(),
        &[Limit {
            bucket: &bucket,
            max: state.mfa.attempts_per_user_per_hour,
            window_secs: 3600,
        }],
    )
    .await?;
    if within {
        Ok(())
    } else {
        Err(ApiError::TooManyRequests)
    }
}

/// Count a code attempt of `user_id` (its `mfa` bucket).
pub(super) async fn count_attempt(
    conn: &mut sqlx::PgConnection,
    state: &AppState,
    user_id: UserId,
) -> ApiResult<()> {
    count_user_hour(conn, state, "mfa", user_id).await
}

/// [`count_attempt`], committed at once (failed attempts count too).
pub(super) async fn attempt_allowed(state: &AppState, user_id: UserId) -> ApiResult<()> {
    let mut tx = state.pool.begin().await?;
    count_attempt(&mut tx, state, user_id).await?;
    tx.commit().await?;
    Ok(())
}

/// POST /v1/auth/mfa/confirm: a code of the pending secret turns MFA on; the
/// answer holds the ten recovery codes, shown once (session only). With
/// `sign_out_other_sessions: true` every other session of the user is revoked
/// in the same transaction (the current one stays). No pending enrollment, or
/// MFA already on: 409; a wrong code: 422; locked out: 429 with Retry-After.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn confirm(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<ConfirmBody>,
) -> ApiResult<HttpResponse> {
    let code = code_of(&body.code)?;
    let user_id = caller.user_id();
    attempt_allowed(&state, user_id).await?;
    let mut tx = state.pool.begin().await?;
    let codes = match mfa::confirm(
        &mut tx,
        state.sealer.as_ref(),
        user_id,
        code,
        &state.mfa.lockout(),
        state.clock.now(),
    )
    .await
    {
        Ok(codes) => codes,
        Err(e) => {
            let wrong = ApiError::Unprocessable(BAD_CODE.into());
            return failed(&state, tx, user_id, &caller.ip, e, wrong).await;
        }
    };
    let revoked = if body.sign_out_other_sessions {
        let current = SessionId::from_uuid(caller.session_id());
        crate::sessions::revoke_all(&mut tx, user_id, Some(current)).await?
    } else {
        Vec::new()
    };
    crate::sessions::enqueue_revoked(&mut tx, &state.naming, user_id, &revoked).await?;
    audit::record(
        &mut tx,
        Some(user_id),
        AuditAction::MfaEnabled,
        &format!("user:{user_id}"),
        json!({"recovery_codes": codes.len(), "other_sessions_revoked": revoked.len()}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    let mut resp = HttpResponse::Ok();
    if !revoked.is_empty() {
        // Gateways drop the revoked sessions when the events arrive: sent
        // before answering, as a logout's.
        state.publish_now().await;
        resp.insert_header(identity_changed(user_id));
    }
    Ok(resp.json(json!({
        "recovery_codes": codes,
        "other_sessions_revoked": revoked.len(),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofBody {
    code: Option<String>,
    recovery_code: Option<String>,
}

impl ProofBody {
    fn proof(&self) -> ApiResult<mfa::Proof<'_>> {
        proof_of(&self.code, &self.recovery_code)
    }
}

/// Exactly one of `code` and `recovery_code`, well formed (400 otherwise).
pub(super) fn proof_of<'a>(
    code: &'a Option<String>,
    recovery_code: &'a Option<String>,
) -> ApiResult<mfa::Proof<'a>> {
    match (code, recovery_code) {
        (Some(c), None) => Ok(mfa::Proof::Code(code_of(c)?)),
        (None, Some(r)) if !r.is_empty() && r.chars().count() <= mfa::MAX_RECOVERY_CODE_LEN => {
            Ok(mfa::Proof::RecoveryCode(r))
        }
        (None, Some(_)) => Err(ApiError::bad_request(
            "recovery_code must be 1 to 64 characters",
        )),
        _ => Err(ApiError::bad_request(
            "give exactly one of code and recovery_code",
        )),
    }
}

/// POST /v1/auth/mfa/disable: a code or a recovery code turns MFA off
/// (session only). MFA off: 409; a wrong code: 422; locked out: 429 with
/// Retry-After; the last factor of staff who must have MFA (no passkey): 409.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn disable(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<ProofBody>,
) -> ApiResult<HttpResponse> {
    let proof = body.proof()?;
    attempt_allowed(&state, caller.user_id()).await?;
    let mut tx = state.pool.begin().await?;
    if let Err(e) = mfa::prove(
        &mut tx,
        state.sealer.as_ref(),
        caller.user_id(),
        &proof,
        &state.mfa.lockout(),
        state.clock.now(),
    )
    .await
    {
        let wrong = ApiError::Unprocessable(BAD_CODE.into());
        return failed(&state, tx, caller.user_id(), &caller.ip, e, wrong).await;
    }
    // Under the person's row lock, as a passkey's delete: staff who must
    // have MFA keep one factor.
    crate::users::lock_name(&mut tx, caller.user_id()).await?;
    if state.mfa.staff_required
        && crate::passkeys::count(&mut tx, caller.user_id()).await? == 0
        && (state.is_staff(&caller.identity.email)
            || crate::passkeys::staff_granted(&mut tx, caller.user_id()).await?)
    {
        return Err(ApiError::conflict(
            "two-factor codes are your only second factor and staff must have one: add a \
             passkey first",
        ));
    }
    mfa::disable(&mut tx, caller.user_id()).await?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        AuditAction::MfaDisabled,
        &format!("user:{}", caller.user_id()),
        json!({"method": proof.method()}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(mfa::Status {
        enabled: false,
        enabled_at: None,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyBody {
    mfa_token: String,
    code: Option<String>,
    recovery_code: Option<String>,
}

/// POST /v1/auth/mfa/verify (public): the `mfa_token` of `POST /v1/auth/verify`
/// and a code (or a recovery code) open the session, as verify would have.
/// Every wrong code counts against the token: after `mfa.max_attempts` it is
/// dead; an unknown, expired, used or dead token and a wrong code answer the
/// same 401. Attempts count against the client IP with verify's, and against
/// the user's `mfa.attempts_per_user_per_hour` (429 beyond); wrong codes in a
/// row against the user's lockout (429 with Retry-After while it runs).
#[tracing::instrument(skip_all)]
pub async fn verify(
    state: web::Data<AppState>,
    ctx: RequestCtx,
    body: web::Json<VerifyBody>,
) -> ApiResult<HttpResponse> {
    if !auth::verify_allowed(&state, ctx.ip()).await? {
        return Err(ApiError::TooManyRequests);
    }
    let proof = proof_of(&body.code, &body.recovery_code)?;
    if body.mfa_token.is_empty() || body.mfa_token.len() > tokens::MAX_TOKEN_LEN {
        return Err(ApiError::unauthorized(BAD_CHALLENGE));
    }
    let hash = tokens::hash(&body.mfa_token);
    let mut tx = state.pool.begin().await?;
    let Some(user_id) = mfa::lock_challenge(&mut tx, &hash, state.mfa.max_attempts).await? else {
        return Err(ApiError::unauthorized(BAD_CHALLENGE));
    };
    // The user's own hourly budget too (the one confirm and disable count
    // against): a mailbox holder with fresh links from many IPs still gets
    // `mfa.attempts_per_user_per_hour` guesses an hour, not five a link. The
    // hit is committed with the outcome, success or failure.
    count_attempt(&mut tx, &state, user_id).await?;
    match mfa::prove(
        &mut tx,
        state.sealer.as_ref(),
        user_id,
        &proof,
        &state.mfa.lockout(),
        state.clock.now(),
    )
    .await
    {
        Ok(()) => {}
        Err(
            e @ (mfa::Error::BadCode | mfa::Error::NotEnabled | mfa::Error::LockoutStarted { .. }),
        ) => {
            // The failure is kept (committed) before answering.
            mfa::challenge_failed(&mut tx, &hash).await?;
            audit::record(
                &mut tx,
                Some(user_id),
                AuditAction::MfaFailed,
                &format!("user:{user_id}"),
                json!({"method": proof.method()}),
                ctx.ip(),
            )
            .await?;
            let e = match e {
                mfa::Error::NotEnabled => mfa::Error::BadCode,
                e => e,
            };
            let wrong = ApiError::unauthorized(BAD_CHALLENGE);
            return failed(&state, tx, user_id, ctx.ip(), e, wrong).await;
        }
        Err(mfa::Error::LockedOut { retry_after_secs }) => return Ok(locked_out(retry_after_secs)),
        Err(e) => return Err(e.into()),
    }
    mfa::challenge_used(&mut tx, &hash).await?;
    let session_token = auth::open_session(
        &mut tx,
        &state,
        user_id,
        ctx.ip(),
        auth::Factors::LinkThenCode(proof.method()),
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({ "session_token": session_token })))
}
