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
use actix_web::{web, HttpResponse};
use event_contracts::AuditAction;
use hub_domain::UserId;
use serde::Deserialize;
use serde_json::json;
use service_kit::{
    assertion::{RequestCtx, SessionCaller},
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
/// again before confirming replaces the pending secret; with MFA on: 409.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn enroll(state: web::Data<AppState>, caller: SessionCaller) -> ApiResult<HttpResponse> {
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
}

/// A code as the body gives it: six digits (400 otherwise).
fn code_of(code: &str) -> ApiResult<&str> {
    if mfa::well_formed(code) {
        Ok(code)
    } else {
        Err(ApiError::bad_request("code must be 6 digits"))
    }
}

/// Count a code attempt of `user_id` against its hourly budget
/// (`mfa.attempts_per_user_per_hour`) in `conn`'s transaction; 429 over it.
async fn count_attempt(
    conn: &mut sqlx::PgConnection,
    state: &AppState,
    user_id: UserId,
) -> ApiResult<()> {
    let bucket = format!("mfa:user:{user_id}");
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

/// [`count_attempt`], committed at once (failed attempts count too).
async fn attempt_allowed(state: &AppState, user_id: UserId) -> ApiResult<()> {
    let mut tx = state.pool.begin().await?;
    count_attempt(&mut tx, state, user_id).await?;
    tx.commit().await?;
    Ok(())
}

/// POST /v1/auth/mfa/confirm: a code of the pending secret turns MFA on; the
/// answer holds the ten recovery codes, shown once (session only). No pending
/// enrollment, or MFA already on: 409; a wrong code: 422.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn confirm(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<ConfirmBody>,
) -> ApiResult<HttpResponse> {
    let code = code_of(&body.code)?;
    attempt_allowed(&state, caller.user_id()).await?;
    let mut tx = state.pool.begin().await?;
    let codes = mfa::confirm(
        &mut tx,
        state.sealer.as_ref(),
        caller.user_id(),
        code,
        state.clock.now(),
    )
    .await?;
    audit::record(
        &mut tx,
        Some(caller.user_id()),
        AuditAction::MfaEnabled,
        &format!("user:{}", caller.user_id()),
        json!({"recovery_codes": codes.len()}),
        &caller.ip,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({ "recovery_codes": codes })))
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
fn proof_of<'a>(
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
/// (session only). MFA off: 409; a wrong code: 422.
#[tracing::instrument(skip_all, fields(user_id = %caller.user_id()))]
pub async fn disable(
    state: web::Data<AppState>,
    caller: SessionCaller,
    body: web::Json<ProofBody>,
) -> ApiResult<HttpResponse> {
    let proof = body.proof()?;
    attempt_allowed(&state, caller.user_id()).await?;
    let mut tx = state.pool.begin().await?;
    mfa::prove(
        &mut tx,
        state.sealer.as_ref(),
        caller.user_id(),
        &proof,
        state.clock.now(),
    )
    .await?;
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
/// the user's `mfa.attempts_per_user_per_hour` (429 beyond).
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
        state.clock.now(),
    )
    .await
    {
        Ok(()) => {}
        Err(mfa::Error::BadCode | mfa::Error::NotEnabled) => {
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
            tx.commit().await?;
            return Err(ApiError::unauthorized(BAD_CHALLENGE));
        }
        Err(e) => return Err(e.into()),
    }
    mfa::challenge_used(&mut tx, &hash).await?;
    let session_token =
        auth::open_session(&mut tx, &state, user_id, ctx.ip(), Some(proof.method())).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(json!({ "session_token": session_token })))
}
