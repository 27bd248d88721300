//! The provisioning worker: API-backed orders are jobs in Postgres
//! (`provision_jobs`), taken with `FOR UPDATE SKIP LOCKED` so that any number
//! of replicas share them and a restart loses none: a job a crashed process
//! held is taken again. For each due job the worker creates the server at the
//! provider (once; the reference is stored) and asks for its status: ready
//! makes the server active (credentials sealed, usage opened, `server.active`
//! emitted) in one transaction; pending or a provider error comes back later,
//! doubling the delay; past `provider.max_attempts` errors, or on a failure
//! the provider reports, the order fails. The statements are in
//! [`servers::store`] (`claim_job`, `reschedule_job`, `drop_job`).

use crate::{
    lifecycle::{self, Action},
    provider::Status,
    servers::{self, store},
    state::AppState,
};
use event_contracts::SERVER_ACTIVE;
use std::time::Duration;
use uuid::Uuid;

/// Run every due job once; returns how many were taken.
pub async fn run_once(state: &AppState, poll: Duration, max_attempts: i32) -> anyhow::Result<u64> {
    let mut taken = 0;
    loop {
        let mut tx = state.pool.begin().await?;
        let Some(job) = store::claim_job(&mut tx, state.clock.now()).await? else {
            return Ok(taken);
        };
        taken += 1;
        let row = servers::load(&mut tx, job.server_id).await??;
        let now = state.clock.now();
        if row.status != servers::Status::Provisioning {
            // Terminated (or otherwise moved on) while provisioning: drop the job.
            store::drop_job(&mut tx, row.id).await?;
            tx.commit().await?;
            continue;
        }
        let outcome = async {
            let reference = match &row.provider_ref {
                Some(r) => r.clone(),
                None => {
                    let r = state.provider.create(&row.hostname).await?;
                    store::set_provider_ref(&mut tx, row.id, &r).await?;
                    r
                }
            };
            state.provider.status(&reference).await
        }
        .await;
        match outcome {
            Ok(Status::Ready(creds)) => {
                let sealed = state
                    .sealer
                    .seal_json(&creds, &servers::credentials_aad(row.id))?;
                store::set_credentials(&mut tx, row.id, sealed).await?;
                let active =
                    lifecycle::transition(&mut tx, row.org_id, row.id, Action::Provisioned, now)
                        .await??;
                servers::open_usage(&mut tx, &active, now).await?;
                servers::emit(&mut tx, state, SERVER_ACTIVE, &active).await?;
                store::drop_job(&mut tx, row.id).await?;
            }
            Ok(Status::Pending) => {
                reschedule(&mut tx, row.id, job.attempts, poll, now, false).await?;
            }
            Ok(Status::Failed(why)) => fail(&mut tx, &row, &why, now).await?,
            Err(e) if job.attempts + 1 >= max_attempts => {
                fail(&mut tx, &row, &format!("{e:#}"), now).await?
            }
            Err(e) => {
                tracing::warn!(error = ?e, server_id = %row.id, "provider call failed; retrying");
                reschedule(&mut tx, row.id, job.attempts, poll, now, true).await?;
            }
        }
        state.outbox.commit(tx).await?;
    }
}

async fn reschedule(
    tx: &mut sqlx::PgConnection,
    id: Uuid,
    attempts: i32,
    poll: Duration,
    now: time::OffsetDateTime,
    error: bool,
) -> sqlx::Result<()> {
    // Pending: poll again; an error: back off, doubling.
    let wait = if error {
        poll * 2u32.saturating_pow(attempts.clamp(0, 10) as u32)
    } else {
        poll
    };
    let due_at = now + time::Duration::try_from(wait).unwrap_or(time::Duration::SECOND);
    store::reschedule_job(tx, id, due_at, error).await
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
