//! Periodic clean-up: expired magic links, dead sessions, old rate-limit
//! hits, mail sent or dropped long ago, dead MFA and passkey challenges, OAuth requests and refresh tokens; pending invites
//! past their expiry are marked expired, settled ones deleted after a while. Idempotent, so every replica may run it.

use crate::settings::JobSettings;
use sqlx::PgPool;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One sweep; returns how many rows it deleted.
pub async fn run_once(pool: &PgPool, keep_secs: i64) -> anyhow::Result<u64> {
    let keep = keep_secs as f64;
    let mut n = sqlx::query!(
        "DELETE FROM magic_links WHERE expires_at < now() - make_interval(secs => $1)",
        keep,
    )
    .execute(pool)
    .await?
    .rows_affected();
    n += sqlx::query!(
        "DELETE FROM sessions WHERE expires_at < now() - make_interval(secs => $1) \
         OR revoked_at < now() - make_interval(secs => $1)",
        keep,
    )
    .execute(pool)
    .await?
    .rows_affected();
    // The longest window is one hour.
    n += sqlx::query!("DELETE FROM rate_limit_hits WHERE at < now() - interval '2 hours'")
        .execute(pool)
        .await?
        .rows_affected();
    n += crate::mail::sweep(pool, keep_secs).await?;
    n += crate::invites::sweep(pool, keep_secs).await?;
    n += crate::mfa::sweep(pool, keep_secs).await?;
    n += crate::passkeys::sweep(pool, keep_secs).await?;
    n += crate::oauth::sweep(pool, keep).await?;
    Ok(n)
}

pub fn spawn(pool: PgPool, jobs: JobSettings, cancel: CancellationToken) -> JoinHandle<()> {
    let keep = jobs.keep_dead_credentials_secs;
    service_kit::shutdown::spawn_periodic(
        "identity-sweep",
        Duration::from_secs(jobs.sweep_interval_secs),
        cancel,
        move || {
            let pool = pool.clone();
            async move { run_once(&pool, keep).await }
        },
    )
}
