//! Organizations' statuses (`org_states`), as org-billing announces them
//! (`core.v1.org.status_changed`), copied onto their memberships
//! (`memberships.org_suspended`, `org_closed`, so the session lookup needs
//! no join): the
//! bearer lookups put each membership's status in the identity they resolve ([`crate::sessions::live_by_hash`],
//! [`crate::api_keys::live_by_hash`]), and services refuse a suspended
//! organization's writes from it. Applying a change tells the gateways
//! (`core.v1.identity.org_changed`, after the commit) to drop the cached
//! identities of its members, so the next request resolves the new status.

use crate::state::AppState;
use event_contracts::{Envelope, OrgAccessChanged, OrgStatusChanged};
use hub_domain::{OrgId, OrgStatus};
use service_kit::{outbox, ApiError};
use sqlx::PgConnection;

/// `org_id`'s status as far as identity has heard (active when it has heard
/// nothing).
pub async fn status(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<OrgStatus> {
    Ok(sqlx::query_scalar!(
        r#"SELECT status AS "status: OrgStatus" FROM org_states WHERE org_id = $1"#,
        org_id as OrgId,
    )
    .fetch_optional(conn)
    .await?
    .unwrap_or_default())
}

/// 403 naming the status unless `org_id` is active (suspended or closed
/// organizations refuse their members' writes).
pub async fn refuse_unless_active(conn: &mut PgConnection, org_id: OrgId) -> Result<(), ApiError> {
    match status(conn, org_id).await?.write_refusal() {
        Some(refusal) => Err(ApiError::forbidden(refusal)),
        None => Ok(()),
    }
}

/// Hold `org_id`'s lock ([`crate::memberships::lock_org`], which a status
/// change takes too) until the transaction ends, then 403 naming the
/// suspension if identity has it suspended: identity's own member writes
/// read the status here rather than from the (possibly cached) identity the
/// gateway forwarded, so that none passes once org-billing's suspend answered
/// (it waits until identity applied the change, [`apply`]).
pub async fn lock_writable(conn: &mut PgConnection, org_id: OrgId) -> Result<(), ApiError> {
    crate::memberships::lock_org(&mut *conn, org_id).await?;
    refuse_unless_active(conn, org_id).await
}

/// The `core.v1.org.status_changed` consumer: [`apply`] (the backstop of
/// org-billing's synchronous call).
pub async fn on_status_changed(
    state: &AppState,
    env: Envelope<OrgStatusChanged>,
) -> anyhow::Result<bool> {
    apply(state, env.data).await
}

/// Apply a status change unless a newer one is already applied (events may
/// arrive late or twice, after or before org-billing's synchronous call);
/// true when it changed something.
pub async fn apply(state: &AppState, e: OrgStatusChanged) -> anyhow::Result<bool> {
    let mut tx = state.pool.begin().await?;
    // Serialized with membership changes of the organization: a membership
    // made meanwhile copies either the old status and is updated below, or
    // the new one.
    crate::memberships::lock_org(&mut tx, e.org_id).await?;
    let applied = sqlx::query_scalar!(
        r#"INSERT INTO org_states (org_id, status, version) VALUES ($1, $2, $3)
           ON CONFLICT (org_id) DO UPDATE SET status = EXCLUDED.status,
                  version = EXCLUDED.version, changed_at = now()
            WHERE org_states.version < EXCLUDED.version
           RETURNING 1 AS "one!""#,
        e.org_id as OrgId,
        e.status as OrgStatus,
        e.version,
    )
    .fetch_optional(&mut *tx)
    .await?
    .is_some();
    if applied {
        sqlx::query!(
            "UPDATE memberships SET org_suspended = $2, org_closed = $3 WHERE org_id = $1",
            e.org_id as OrgId,
            e.status == OrgStatus::Suspended,
            e.status == OrgStatus::Closed,
        )
        .execute(&mut *tx)
        .await?;
        if e.status == OrgStatus::Closed {
            // A closed organization has no programmatic access left.
            let keys = crate::api_keys::revoke_all_of(&mut tx, e.org_id).await?;
            crate::api_keys::enqueue_revoked(&mut tx, &state.naming, &keys).await?;
        }
        outbox::enqueue(
            &mut tx,
            &state.naming,
            OrgAccessChanged { org_id: e.org_id },
        )
        .await?;
    }
    tx.commit().await?;
    if applied {
        state.publish_now().await;
        tracing::info!(org_id = %e.org_id, status = e.status.as_str(), version = e.version, "organization status applied");
    }
    Ok(applied)
}
