//! The provisioning worker: API-backed orders are jobs in Postgres
//! (`provision_jobs`), taken with `FOR UPDATE SKIP LOCKED` so that any number
//! of replicas share them and a restart loses none: a job a crashed process
//! held is taken again. For each due job the worker creates the server at the
//! provider (once; the reference is stored) and asks for its status: ready
//! makes the server active (credentials sealed, usage opened, `server.active`
//! emitted) in one transaction; pending comes back when the provider expects
//! it to be ready (its estimate, within [`MAX_WAIT`]) or at the next poll when
//! it gives none; a provider error comes back later, doubling the delay; past
//! `provider.max_attempts` errors, or on a failure the provider reports, the
//! order fails.
//!
//! Jobs are taken [`BATCH`] at a time, each with its server locked, and a
//! batch is one transaction: its provider calls (up to [`PROVIDER_CALLS`] at
//! once), then one statement per kind of change for the whole batch (new
//! provider references, activations with their usage periods and events,
//! reschedules, dropped jobs). A transaction per job made every job pay a
//! commit and half a dozen round trips, and one worker could not keep up with
//! a few hundred orders a second. The statements are in [`servers::store`]
//! (`claim_jobs`, `reschedule_jobs`, `drop_jobs`, ...).

use crate::{
    lifecycle::{self, Action},
    provider::Status,
    servers::{self, store, Row},
    state::AppState,
};
use event_contracts::SERVER_ACTIVE;
use futures::{stream, StreamExt};
use hub_domain::ServerId;
use std::time::Duration;
use time::OffsetDateTime;

/// Jobs taken in one transaction.
pub const BATCH: i64 = 200;
/// Provider calls in flight at once within a batch.
pub const PROVIDER_CALLS: usize = 16;
/// The longest a pending job waits for the provider's estimate before its
/// status is asked again.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// What the provider answered for one job: the reference it created in this
/// pass (to store), and the server's status (or the error met).
struct Asked {
    created: Option<String>,
    status: anyhow::Result<Status>,
}

async fn ask(state: &AppState, row: &Row) -> Asked {
    let (reference, created) = match &row.provider_ref {
        Some(r) => (r.clone(), None),
        None => match state.provider.create(&row.hostname).await {
            Ok(r) => (r.clone(), Some(r)),
            Err(e) => {
                return Asked {
                    created: None,
                    status: Err(e),
                }
            }
        },
    };
    Asked {
        created,
        status: state.provider.status(&reference).await,
    }
}

/// The changes of one batch, applied together.
#[derive(Default)]
struct Changes {
    refs: (Vec<ServerId>, Vec<String>),
    ready: (Vec<ServerId>, Vec<Vec<u8>>),
    again: (Vec<ServerId>, Vec<OffsetDateTime>, Vec<i32>),
    failed: Vec<(Row, String)>,
    dropped: Vec<ServerId>,
}

/// When a pending job is due again: at the provider's estimate, no sooner
/// than the next poll and no later than [`MAX_WAIT`]; at the next poll
/// without one.
fn pending_due(now: OffsetDateTime, poll: Duration, eta: Option<OffsetDateTime>) -> OffsetDateTime {
    let soonest = now + poll;
    match eta {
        Some(eta) => eta.clamp(soonest, now + MAX_WAIT.max(poll)),
        None => soonest,
    }
}

/// After provider error number `attempts + 1`: back off, doubling.
fn backoff_due(now: OffsetDateTime, poll: Duration, attempts: i32) -> OffsetDateTime {
    let wait = poll * 2u32.saturating_pow(attempts.clamp(0, 10) as u32);
    now + time::Duration::try_from(wait).unwrap_or(time::Duration::SECOND)
}

/// Run every due job once; returns how many were taken.
pub async fn run_once(state: &AppState, poll: Duration, max_attempts: i32) -> anyhow::Result<u64> {
    let mut taken = 0;
    loop {
        let mut tx = state.pool.begin().await?;
        let now = state.clock.now();
        let jobs = store::claim_jobs(&mut tx, now, BATCH).await?;
        if jobs.is_empty() {
            return Ok(taken);
        }
        let batch = jobs.len();
        taken += batch as u64;
        let asked: Vec<_> = stream::iter(jobs)
            .map(|job| async move {
                // Terminated (or otherwise moved on) while provisioning: no call.
                let asked = match job.row.status {
                    servers::Status::Provisioning => Some(ask(state, &job.row).await),
                    _ => None,
                };
                (job, asked)
            })
            .buffered(PROVIDER_CALLS)
            .collect()
            .await;
        let mut c = Changes::default();
        for (job, asked) in asked {
            let row = job.row;
            let Some(asked) = asked else {
                c.dropped.push(row.id);
                continue;
            };
            if let Some(r) = asked.created {
                c.refs.0.push(row.id);
                c.refs.1.push(r);
            }
            match asked.status {
                Ok(Status::Ready(creds)) => {
                    let sealed = state
                        .sealer
                        .seal_json(&creds, &servers::credentials_aad(row.id))?;
                    c.ready.0.push(row.id);
                    c.ready.1.push(sealed);
                }
                Ok(Status::Pending { eta }) => {
                    c.again.0.push(row.id);
                    c.again.1.push(pending_due(now, poll, eta));
                    c.again.2.push(0);
                }
                Ok(Status::Failed(why)) => c.failed.push((row, why)),
                Err(e) if job.attempts + 1 >= max_attempts => {
                    c.failed.push((row, format!("{e:#}")))
                }
                Err(e) => {
                    tracing::warn!(error = ?e, server_id = %row.id, "provider call failed; retrying");
                    c.again.0.push(row.id);
                    c.again.1.push(backoff_due(now, poll, job.attempts));
                    c.again.2.push(1);
                }
            }
        }
        apply(&mut tx, state, c, now).await?;
        state.outbox.commit(tx).await?;
        if (batch as i64) < BATCH {
            return Ok(taken);
        }
    }
}

/// One statement per kind of change, in the batch's transaction.
async fn apply(
    tx: &mut sqlx::PgConnection,
    state: &AppState,
    c: Changes,
    now: OffsetDateTime,
) -> anyhow::Result<()> {
    if !c.refs.0.is_empty() {
        store::set_provider_refs(&mut *tx, &c.refs.0, &c.refs.1).await?;
    }
    let mut dropped = c.dropped;
    if !c.ready.0.is_empty() {
        let active = lifecycle::provisioned_all(&mut *tx, &c.ready.0, &c.ready.1, now).await?;
        // The claim holds every server of the batch: each one still provisioning moves.
        anyhow::ensure!(
            active.len() == c.ready.0.len(),
            "{} of {} servers ready at the provider did not become active",
            c.ready.0.len() - active.len(),
            c.ready.0.len()
        );
        servers::open_usage_all(&mut *tx, &active, now).await?;
        servers::emit_all(
            &mut *tx,
            &state.naming,
            &state.clock,
            SERVER_ACTIVE,
            &active,
        )
        .await?;
        dropped.extend(active.iter().map(|r| r.id));
    }
    if !c.again.0.is_empty() {
        store::reschedule_jobs(&mut *tx, &c.again.0, &c.again.1, &c.again.2).await?;
    }
    // By organization: each failure takes its organization's `org_servers`
    // row lock (the cap's count), in the order order batches take them.
    let mut failed = c.failed;
    failed.sort_by_key(|(row, _)| row.org_id);
    for (row, why) in &failed {
        fail(&mut *tx, row, why, now).await?;
    }
    if !dropped.is_empty() {
        store::drop_jobs(&mut *tx, &dropped).await?;
    }
    Ok(())
}

async fn fail(
    tx: &mut sqlx::PgConnection,
    row: &servers::Row,
    why: &str,
    now: time::OffsetDateTime,
) -> anyhow::Result<()> {
    tracing::warn!(server_id = %row.id, reason = why, "provisioning failed");
    lifecycle::transition(tx, row.org_id, row.id, Action::Fail, now).await??;
    store::set_failure(tx, row.id, why).await?;
    store::drop_job(tx, row.id).await?;
    Ok(())
}

/// Run the worker until `cancel` fires.
pub fn spawn(
    state: actix_web::web::Data<AppState>,
    poll: Duration,
    max_attempts: i32,
    cancel: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(poll) => {}
            }
            if let Err(e) = run_once(&state, poll, max_attempts).await {
                if !service_kit::outage::report_background(&e) {
                    tracing::warn!(error = ?e, "provisioning pass failed");
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_jobs_come_back_at_the_estimate_within_bounds() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let poll = Duration::from_millis(200);
        let ms = time::Duration::milliseconds;
        // No estimate: the next poll.
        assert_eq!(pending_due(now, poll, None), now + ms(200));
        // An estimate: then, but never sooner than the next poll...
        assert_eq!(pending_due(now, poll, Some(now + ms(3000))), now + ms(3000));
        assert_eq!(pending_due(now, poll, Some(now + ms(50))), now + ms(200));
        assert_eq!(pending_due(now, poll, Some(now - ms(5000))), now + ms(200));
        // ...nor later than MAX_WAIT.
        assert_eq!(
            pending_due(now, poll, Some(now + time::Duration::hours(5))),
            now + time::Duration::try_from(MAX_WAIT).expect("fits")
        );
        // Errors back off, doubling from the poll.
        assert_eq!(backoff_due(now, poll, 0), now + ms(200));
        assert_eq!(backoff_due(now, poll, 3), now + ms(1600));
    }
}
