//! The second factor: TOTP (RFC 6238: HMAC-SHA-1, 6 digits, 30-second steps,
//! one step either side accepted) with single-use recovery codes, and the
//! sign-in challenge between a redeemed magic link and the code (`mfa_token`).
//! Storage (`mfa`, `mfa_recovery_codes`, `mfa_challenges`) is checked at compile
//! time; functions take the caller's transaction.
//!
//! - The secret is sealed with the kit sealer (AES-256-GCM, bound to the user)
//!   and never stored in the clear, logged, audited or published. It is shown
//!   once, in the enrollment answer.
//! - A code works once: the step it was accepted at is stored (`last_step`),
//!   and only codes of later steps are accepted afterwards (under the row's lock).
//! - Recovery codes (80 bits each) and `mfa_token`s are stored as SHA-256 only.
//! - Wrong codes in a row are counted per user (confirm, disable and verify
//!   together); at [`Lockout::after`] of them the user's codes are locked out
//!   for [`Lockout::base_secs`], each further lockout twice as long, capped
//!   ([`Lockout::duration`]). A right code resets the count and the doubling.

use crate::tokens::random_bytes as random;
use hub_domain::UserId;
use serde::Serialize;
use service_kit::sealed::Sealer;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;
use totp_rs::{Algorithm, TOTP};

/// Digits of a code.
pub const DIGITS: usize = 6;
/// Seconds of a time step.
pub const STEP_SECS: u64 = 30;
/// Steps accepted either side of the current one (clock drift).
pub const SKEW: u64 = 1;
/// Bytes of a secret: 160 bits, RFC 4226's recommendation.
const SECRET_BYTES: usize = 20;
/// Recovery codes made when MFA is confirmed.
pub const RECOVERY_CODES: usize = 10;
/// Bytes of a recovery code (80 bits, 20 hex digits).
const RECOVERY_CODE_BYTES: usize = 10;
/// Longest recovery code accepted as input (characters, with separators),
/// before normalizing.
pub const MAX_RECOVERY_CODE_LEN: usize = 64;

/// What an MFA step may refuse, apart from database errors.
#[derive(Debug)]
pub enum Error {
    /// Enrolling while MFA is already on.
    AlreadyEnabled,
    /// Confirming with no pending enrollment.
    NotEnrolled,
    /// Disabling (or proving) while MFA is off.
    NotEnabled,
    /// The code or recovery code does not verify (or was used).
    BadCode,
    /// No sealing key: secrets cannot be stored.
    NoSealer,
    /// The user's codes are locked out for this many more seconds (nothing
    /// was checked).
    LockedOut {
        retry_after_secs: i64,
    },
    /// This wrong code began a lockout of this many seconds (recorded: the
    /// caller commits it and tells the account's address).
    LockoutStarted {
        lockout_secs: i64,
    },
    Db(sqlx::Error),
    Other(anyhow::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e)
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::Other(e)
    }
}

/// Whether MFA is on for a user (the MFAStatus resource).
#[derive(Serialize, Debug)]
pub struct Status {
    pub enabled: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    pub enabled_at: Option<OffsetDateTime>,
}

/// A new (pending) enrollment, shown once.
#[derive(Serialize)]
pub struct Enrollment {
    /// The secret, base32 without padding (what apps take when typed in).
    pub secret: String,
    pub otpauth_uri: String,
}

/// The lockout after too many wrong codes in a row (`[mfa]` settings).
#[derive(Debug, Clone, Copy)]
pub struct Lockout {
    /// Wrong codes in a row that begin a lockout.
    pub after: i32,
    pub base_secs: i64,
    pub max_secs: i64,
}

impl Lockout {
    /// The length of the lockout that follows `earlier` ones (no right code
    /// between): base, doubled per earlier lockout, at most `max_secs`.
    pub fn duration(&self, earlier: i32) -> i64 {
        let shift = earlier.clamp(0, 40) as u32;
        self.base_secs
            .saturating_mul(1i64 << shift)
            .min(self.max_secs)
    }
}

/// What a user proves possession with.
pub enum Proof<'a> {
    Code(&'a str),
    RecoveryCode(&'a str),
}

impl Proof<'_> {
    /// How the factor was proven, for audit detail.
    pub fn method(&self) -> &'static str {
        match self {
            Proof::Code(_) => "totp",
            Proof::RecoveryCode(_) => "recovery_code",
        }
    }
}

fn aad(user_id: UserId) -> Vec<u8> {
    format!("mfa:{user_id}").into_bytes()
}

fn totp(secret: Vec<u8>, issuer: &str, account: &str) -> anyhow::Result<TOTP> {
    TOTP::new(
        Algorithm::SHA1,
        DIGITS,
        // The library's own skew is not used: `step_of` walks the window to
        // learn which step matched (replay protection needs it).
        0,
        STEP_SECS,
        secret,
        (!issuer.is_empty()).then(|| issuer.to_owned()),
        account.to_owned(),
    )
    .map_err(|e| anyhow::anyhow!("TOTP parameters refused: {e:?}"))
}

/// Whether `code` is six ASCII digits (the only form a code takes).
pub fn well_formed(code: &str) -> bool {
    code.len() == DIGITS && code.bytes().all(|b| b.is_ascii_digit())
}

/// The time step (`unix / 30`) of `now`.
pub fn step_at(now: OffsetDateTime) -> i64 {
    now.unix_timestamp().max(0) / STEP_SECS as i64
}

/// The step, later than `after`, within one step of `now`, whose code `code`
/// is; None if there is none (a wrong code, or one already used).
fn step_of(
    secret: &[u8],
    code: &str,
    now: OffsetDateTime,
    after: Option<i64>,
) -> anyhow::Result<Option<i64>> {
    if !well_formed(code) {
        return Ok(None);
    }
    let t = totp(secret.to_vec(), "", "")?;
    let current = step_at(now);
    // Every candidate step is checked (the library compares in constant time,
    // its skew 0 making `check` one step's comparison); the earliest unused
    // one that matches is the code's.
    let matches: Vec<i64> = (current - SKEW as i64..=current + SKEW as i64)
        .filter(|&step| step >= 0 && after.is_none_or(|a| step > a))
        .filter(|&step| t.check(code, step as u64 * STEP_SECS))
        .collect();
    Ok(matches.first().copied())
}

/// Normalize a recovery code as typed: lower case, separators dropped.
fn normalize_recovery(code: &str) -> String {
    code.chars()
        .filter(|c| !matches!(c, '-' | ' ' | '\t'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// `user_id`'s status.
pub async fn status(pool: &PgPool, user_id: UserId) -> sqlx::Result<Status> {
    let enabled_at = sqlx::query_scalar!(
        "SELECT enabled_at FROM mfa WHERE user_id = $1",
        user_id as UserId,
    )
    .fetch_optional(pool)
    .await?
    .flatten();
    Ok(Status {
        enabled: enabled_at.is_some(),
        enabled_at,
    })
}

/// Whether `user_id` has MFA on (sign-in asks for a code then).
pub async fn is_enabled(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT enabled_at IS NOT NULL AS "on!" FROM mfa WHERE user_id = $1"#,
        user_id as UserId,
    )
    .fetch_optional(conn)
    .await?
    .unwrap_or(false))
}

/// Make (or replace) `user_id`'s pending secret. Refused while MFA is on.
pub async fn enroll(
    conn: &mut PgConnection,
    sealer: Option<&Sealer>,
    user_id: UserId,
    account: &str,
    issuer: &str,
) -> Result<Enrollment, Error> {
    let sealer = sealer.ok_or(Error::NoSealer)?;
    let secret = random(SECRET_BYTES)?;
    let t = totp(secret.clone(), issuer, account)?;
    let sealed = sealer.seal(&secret, &aad(user_id))?;
    // Replaces a pending secret only; a confirmed one stays (0 rows: on).
    let stored = sqlx::query!(
        "INSERT INTO mfa (user_id, secret_sealed) VALUES ($1, $2) \
         ON CONFLICT (user_id) DO UPDATE SET secret_sealed = EXCLUDED.secret_sealed, \
             last_step = NULL, created_at = now() \
         WHERE mfa.enabled_at IS NULL",
        user_id as UserId,
        sealed,
    )
    .execute(conn)
    .await?
    .rows_affected();
    if stored != 1 {
        return Err(Error::AlreadyEnabled);
    }
    Ok(Enrollment {
        secret: t.get_secret_base32(),
        otpauth_uri: t.get_url(),
    })
}

/// `user_id`'s secret, its state and last accepted step, the row locked until
/// the transaction ends; None without one.
struct Locked {
    secret: Vec<u8>,
    enabled: bool,
    last_step: Option<i64>,
    failed_codes: i32,
    lockouts: i32,
    locked_until: Option<OffsetDateTime>,
}

impl Locked {
    /// Refused without a check while a lockout runs.
    fn open(&self, now: OffsetDateTime) -> Result<(), Error> {
        match self.locked_until {
            Some(until) if until > now => Err(Error::LockedOut {
                // Whole seconds, rounded up: never "try again in 0 s".
                retry_after_secs: ((until - now).whole_milliseconds() as i64 + 999) / 1000,
            }),
            _ => Ok(()),
        }
    }
}

/// Count a wrong code of `user_id` (under the row's lock): [`Error::BadCode`],
/// or [`Error::LockoutStarted`] when it is the `after`-th in a row.
async fn wrong_code(
    conn: &mut PgConnection,
    user_id: UserId,
    locked: &Locked,
    policy: &Lockout,
    now: OffsetDateTime,
) -> Result<(), Error> {
    let failed = locked.failed_codes.saturating_add(1);
    if failed < policy.after {
        sqlx::query!(
            "UPDATE mfa SET failed_codes = $2 WHERE user_id = $1",
            user_id as UserId,
            failed,
        )
        .execute(conn)
        .await?;
        return Err(Error::BadCode);
    }
    let secs = policy.duration(locked.lockouts);
    sqlx::query!(
        "UPDATE mfa SET failed_codes = 0, lockouts = lockouts + 1, \
             locked_until = $2::timestamptz + make_interval(secs => $3) \
         WHERE user_id = $1",
        user_id as UserId,
        now,
        secs as f64,
    )
    .execute(conn)
    .await?;
    Err(Error::LockoutStarted { lockout_secs: secs })
}

/// A right code: the count of wrong ones and the doubling start over.
async fn right_code(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE mfa SET failed_codes = 0, lockouts = 0, locked_until = NULL WHERE user_id = $1",
        user_id as UserId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

async fn lock(
    conn: &mut PgConnection,
    sealer: Option<&Sealer>,
    user_id: UserId,
) -> Result<Option<Locked>, Error> {
    let Some(row) = sqlx::query!(
        "SELECT secret_sealed, enabled_at, last_step, failed_codes, lockouts, locked_until \
         FROM mfa WHERE user_id = $1 FOR UPDATE",
        user_id as UserId,
    )
    .fetch_optional(conn)
    .await?
    else {
        return Ok(None);
    };
    let sealer = sealer.ok_or(Error::NoSealer)?;
    let secret = sealer
        .open(&row.secret_sealed, &aad(user_id))
        .map_err(|e| Error::Other(anyhow::anyhow!("the sealed TOTP secret: {e}")))?;
    Ok(Some(Locked {
        secret,
        enabled: row.enabled_at.is_some(),
        last_step: row.last_step,
        failed_codes: row.failed_codes,
        lockouts: row.lockouts,
        locked_until: row.locked_until,
    }))
}

/// Record that a code of `step` was accepted (under the row's lock).
async fn accept_step(conn: &mut PgConnection, user_id: UserId, step: i64) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "UPDATE mfa SET last_step = $2 WHERE user_id = $1 AND (last_step IS NULL OR last_step < $2)",
        user_id as UserId,
        step,
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Confirm the pending enrollment with a `code` of its secret: MFA is on, and
/// the returned recovery codes (shown once) replace any earlier ones. A wrong
/// code is counted ([`Error::BadCode`], [`Error::LockoutStarted`]: the caller
/// commits it).
pub async fn confirm(
    conn: &mut PgConnection,
    sealer: Option<&Sealer>,
    user_id: UserId,
    code: &str,
    policy: &Lockout,
    now: OffsetDateTime,
) -> Result<Vec<String>, Error> {
    let locked = match lock(&mut *conn, sealer, user_id).await? {
        Some(l) if l.enabled => return Err(Error::AlreadyEnabled),
        Some(l) => l,
        None => return Err(Error::NotEnrolled),
    };
    locked.open(now)?;
    let Some(step) = step_of(&locked.secret, code, now, locked.last_step)? else {
        wrong_code(&mut *conn, user_id, &locked, policy, now).await?;
        return Err(Error::BadCode);
    };
    right_code(&mut *conn, user_id).await?;
    sqlx::query!(
        "UPDATE mfa SET enabled_at = now(), last_step = $2 WHERE user_id = $1",
        user_id as UserId,
        step,
    )
    .execute(&mut *conn)
    .await?;
    let mut codes = Vec::with_capacity(RECOVERY_CODES);
    let mut hashes = Vec::with_capacity(RECOVERY_CODES);
    for _ in 0..RECOVERY_CODES {
        let raw = hex::encode(random(RECOVERY_CODE_BYTES)?);
        hashes.push(crate::tokens::hash(&raw));
        // Shown in groups of five for reading; any separators are ignored.
        let shown = raw
            .as_bytes()
            .chunks(5)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join("-");
        codes.push(shown);
    }
    sqlx::query!(
        "DELETE FROM mfa_recovery_codes WHERE user_id = $1",
        user_id as UserId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO mfa_recovery_codes (user_id, code_hash) SELECT $1, * FROM UNNEST($2::bytea[])",
        user_id as UserId,
        &hashes,
    )
    .execute(&mut *conn)
    .await?;
    Ok(codes)
}

/// Check `proof` for `user_id`, whose MFA must be on; a code is used up (its
/// step recorded), a recovery code spent. A wrong one is counted
/// ([`Error::BadCode`], [`Error::LockoutStarted`]: the caller commits it).
pub async fn prove(
    conn: &mut PgConnection,
    sealer: Option<&Sealer>,
    user_id: UserId,
    proof: &Proof<'_>,
    policy: &Lockout,
    now: OffsetDateTime,
) -> Result<(), Error> {
    let locked = match lock(&mut *conn, sealer, user_id).await? {
        Some(l) if l.enabled => l,
        _ => return Err(Error::NotEnabled),
    };
    locked.open(now)?;
    let ok = match proof {
        Proof::Code(code) => match step_of(&locked.secret, code, now, locked.last_step)? {
            Some(step) => accept_step(&mut *conn, user_id, step).await?,
            None => false,
        },
        Proof::RecoveryCode(code) => {
            let normalized = normalize_recovery(code);
            sqlx::query!(
                "UPDATE mfa_recovery_codes SET used_at = now() \
                 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL",
                user_id as UserId,
                crate::tokens::hash(&normalized),
            )
            .execute(&mut *conn)
            .await?
            .rows_affected()
                == 1
        }
    };
    if ok {
        right_code(&mut *conn, user_id).await?;
        Ok(())
    } else {
        wrong_code(&mut *conn, user_id, &locked, policy, now).await?;
        Err(Error::BadCode)
    }
}

/// The address of `user_id` (a lockout's notice goes there).
pub async fn email_of(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<String> {
    sqlx::query_scalar!("SELECT email FROM users WHERE id = $1", user_id as UserId)
        .fetch_one(conn)
        .await
}

/// Turn MFA off for `user_id`: the secret, the recovery codes and any
/// sign-in halfway go.
pub async fn disable(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM mfa WHERE user_id = $1", user_id as UserId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        "DELETE FROM mfa_recovery_codes WHERE user_id = $1",
        user_id as UserId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM mfa_challenges WHERE user_id = $1",
        user_id as UserId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Store a sign-in halfway for `user_id` (only the token's hash), valid `ttl_secs`.
pub async fn open_challenge(
    conn: &mut PgConnection,
    token_hash: Vec<u8>,
    user_id: UserId,
    ttl_secs: f64,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO mfa_challenges (token_hash, user_id, expires_at) \
         VALUES ($1, $2, now() + make_interval(secs => $3))",
        token_hash,
        user_id as UserId,
        ttl_secs,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The user of the live challenge `token_hash` (unused, unexpired, under
/// `max_attempts` failures), the row locked until the transaction ends.
pub async fn lock_challenge(
    conn: &mut PgConnection,
    token_hash: &[u8],
    max_attempts: i32,
) -> sqlx::Result<Option<UserId>> {
    sqlx::query_scalar!(
        r#"SELECT user_id AS "user_id: UserId" FROM mfa_challenges
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() AND failures < $2
         FOR UPDATE"#,
        token_hash,
        max_attempts,
    )
    .fetch_optional(conn)
    .await
}

/// Count a failed code against the challenge.
pub async fn challenge_failed(conn: &mut PgConnection, token_hash: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE mfa_challenges SET failures = failures + 1 WHERE token_hash = $1",
        token_hash,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The challenge is done (a session was opened with it).
pub async fn challenge_used(conn: &mut PgConnection, token_hash: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE mfa_challenges SET used_at = now() WHERE token_hash = $1",
        token_hash,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Delete challenges dead for longer than `keep_secs` (the sweep).
pub async fn sweep(pool: &PgPool, keep_secs: i64) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "DELETE FROM mfa_challenges WHERE expires_at < now() - make_interval(secs => $1)",
        keep_secs as f64,
    )
    .execute(pool)
    .await?
    .rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 6238 appendix B: the SHA-1 seed "12345678901234567890", 8-digit
    // codes; the last six digits are the 6-digit code of the same step.
    #[test]
    fn codes_follow_rfc_6238() {
        let secret = b"12345678901234567890".to_vec();
        for (t, eight) in [
            (59_i64, "94287082"),
            (1111111109, "07081804"),
            (1111111111, "14050471"),
            (1234567890, "89005924"),
            (2000000000, "69279037"),
        ] {
            let now = OffsetDateTime::from_unix_timestamp(t).expect("time");
            let code = &eight[2..];
            assert_eq!(
                step_of(&secret, code, now, None).expect("check"),
                Some(t / 30),
                "t={t}"
            );
        }
    }

    #[test]
    fn one_step_either_side_and_never_a_used_one() {
        let secret = b"12345678901234567890".to_vec();
        let t = totp(secret.clone(), "", "").expect("totp");
        let now = OffsetDateTime::from_unix_timestamp(3000).expect("time");
        let step = step_at(now);
        let code = |s: i64| t.generate(s as u64 * STEP_SECS);
        for s in [step - 1, step, step + 1] {
            assert_eq!(step_of(&secret, &code(s), now, None).expect("ok"), Some(s));
        }
        for s in [step - 2, step + 2] {
            assert_eq!(step_of(&secret, &code(s), now, None).expect("ok"), None);
        }
        assert_eq!(
            step_of(&secret, &code(step), now, Some(step)).expect("ok"),
            None
        );
        assert_eq!(
            step_of(&secret, &code(step + 1), now, Some(step)).expect("ok"),
            Some(step + 1)
        );
        for bad in ["", "12345", "1234567", "12345a", "１２３４５６"] {
            assert_eq!(step_of(&secret, bad, now, None).expect("ok"), None, "{bad}");
        }
    }

    #[test]
    fn each_further_lockout_doubles_up_to_the_cap() {
        let l = Lockout {
            after: 5,
            base_secs: 300,
            max_secs: 3600,
        };
        let got: Vec<i64> = (0..6).map(|n| l.duration(n)).collect();
        assert_eq!(got, [300, 600, 1200, 2400, 3600, 3600]);
        assert_eq!(l.duration(i32::MAX), 3600);
    }

    #[test]
    fn recovery_codes_ignore_case_and_separators() {
        assert_eq!(normalize_recovery("AB12C-d34ef"), "ab12cd34ef");
        assert_eq!(normalize_recovery(" ab12c d34ef "), "ab12cd34ef");
    }
}
