//! Data minimization: `retention.purge_after_days` (180) after its decision, a
//! submission's raw payload (fields and address, and the keys submitted) and
//! its review notes (free text a reviewer may have filled with what they saw)
//! are deleted; only status, requested field keys, ids and timestamps survive,
//! and `purged_at` is set. The verified legal identity is not a submission's:
//! kyc's `org_state` and org-billing keep it, sealed (proto-docs/decisions.md,
//! "Personal data"). Runs every `retention.sweep_interval_secs` on every
//! replica: each pass takes its rows with `FOR UPDATE SKIP LOCKED`, so replicas
//! never purge the same row twice and never skip one. "Now" comes from the
//! service's clock (tests move it).

use hub_domain::SubmissionId;
use service_kit::Clock;
use sqlx::PgPool;

/// Rows one statement purges at most.
const BATCH: i64 = 500;

/// Purge every submission decided more than `after_days` ago; returns the ids
/// this call purged.
pub async fn run_once(
    pool: &PgPool,
    clock: &Clock,
    after_days: i64,
) -> anyhow::Result<Vec<SubmissionId>> {
    let mut purged = Vec::new();
    loop {
        let now = clock.now();
        let ids = crate::store::purge_decided(pool, now, after_days as i32, BATCH).await?;
        let n = ids.len();
        purged.extend(ids);
        if (n as i64) < BATCH {
            break;
        }
    }
    if !purged.is_empty() {
        tracing::info!(purged = purged.len(), "KYC payloads redacted");
    }
    Ok(purged)
}
