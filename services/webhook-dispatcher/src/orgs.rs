//! Organizations' statuses, as org-billing announces them
//! (`core.v1.org.status_changed`): a suspended (or closed) organization's deliveries
//! wait in the queue, parked ([`PARKED`]: due never), neither attempted nor
//! failed nor counted; its reactivation makes them due now, and they go out
//! as if they had just been queued. The fan-out parks a suspended
//! organization's new deliveries and the claim parks any that come due
//! (retries, give-backs); an attempt waiting in memory finds the suspension
//! at its endpoint's next check and goes back to the queue (see
//! `worker::Dispatch::cleared`).

use crate::{state::AppState, worker::PARKED};
use event_contracts::{Envelope, OrgStatusChanged};
use hub_domain::OrgId;

/// Apply a status change unless a newer one is already applied (events may
/// arrive late or twice); then, if the organization is active as applied,
/// unpark its deliveries (every time: a redelivered reactivation finishes
/// what a failed one began).
pub async fn on_status_changed(
    state: &AppState,
    env: Envelope<OrgStatusChanged>,
) -> anyhow::Result<()> {
    let e = env.data;
    // Committed on its own before unparking: the claims and fan-outs that
    // park hold this row (FOR SHARE) until they commit, so this waits for
    // them, and what they parked is visible to the unparking below.
    let suspended = sqlx::query_scalar!(
        r#"WITH applied AS (
             INSERT INTO org_states (org_id, suspended, version) VALUES ($1, $2, $3)
             ON CONFLICT (org_id) DO UPDATE SET suspended = EXCLUDED.suspended,
                    version = EXCLUDED.version, changed_at = now()
              WHERE org_states.version < EXCLUDED.version
             RETURNING suspended)
           SELECT COALESCE((SELECT suspended FROM applied),
                           (SELECT suspended FROM org_states WHERE org_id = $1)) AS "suspended!""#,
        e.org_id as OrgId,
        !e.status.is_active(),
        e.version,
    )
    .fetch_one(&state.pool)
    .await?;
    if suspended {
        tracing::info!(org_id = %e.org_id, version = e.version, "organization suspended: its deliveries wait");
        return Ok(());
    }
    let resumed = sqlx::query!(
        "UPDATE queue SET due_at = $3 WHERE due_at = $2 \
         AND endpoint_id IN (SELECT id FROM endpoints WHERE org_id = $1)",
        e.org_id as OrgId,
        PARKED,
        state.clock.now(),
    )
    .execute(&state.pool)
    .await?
    .rows_affected();
    if resumed > 0 {
        tracing::info!(org_id = %e.org_id, resumed, "organization active: its deliveries resume");
        state.wake.notify_one();
    }
    Ok(())
}
