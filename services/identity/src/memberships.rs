//! Memberships: the per-organization lock and the announcement every change
//! makes, and the creator-becomes-owner rule shared by the internal fast path
//! and the `core.v1.org.created` consumer.

use crate::state::AppState;
use event_contracts::{Envelope, IdentityChanged, MembershipChanged, Naming, OrgCreated};
use hub_domain::{OrgId, Role, UserId};
use service_kit::outbox;
use sqlx::PgConnection;

/// Serialize membership changes of `org_id` (adds, role changes, the first
/// owner) until the transaction ends.
pub async fn lock_org(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 1))")
        .bind(org_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Tell the gateways (`identity.changed`) and org-billing's replica
/// (`membership.changed`) that `user_id` now has `role` in `org_id`.
pub async fn announce(
    conn: &mut PgConnection,
    naming: &Naming,
    org_id: OrgId,
    user_id: UserId,
    role: Role,
) -> anyhow::Result<()> {
    outbox::enqueue(&mut *conn, naming, IdentityChanged { user_id }).await?;
    outbox::enqueue(
        conn,
        naming,
        MembershipChanged {
            org_id,
            user_id,
            role: Some(role),
        },
    )
    .await?;
    Ok(())
}

/// Make `user_id` the owner of a new organization `org_id`. Only acts while the
/// organization has no members at all, so it cannot be used to join an existing
/// one; repeating it is a no-op. Returns whether it inserted.
pub async fn ensure_creator_owner(
    state: &AppState,
    org_id: OrgId,
    user_id: UserId,
) -> anyhow::Result<bool> {
    let mut tx = state.pool.begin().await?;
    // Serialize with member adds on the same organization.
    lock_org(&mut tx, org_id).await?;
    let inserted = sqlx::query(
        "INSERT INTO memberships (org_id, user_id, role) \
         SELECT $1, $2, 'owner' WHERE NOT EXISTS (SELECT 1 FROM memberships WHERE org_id = $1) \
           AND EXISTS (SELECT 1 FROM users WHERE id = $2) \
         ON CONFLICT DO NOTHING",
    )
    .bind(org_id)
    .bind(user_id)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if inserted {
        announce(&mut tx, &state.naming, org_id, user_id, Role::Owner).await?;
    }
    tx.commit().await?;
    if inserted {
        state.publish_now().await;
    }
    Ok(inserted)
}

/// The guarantee behind the fast path: apply `core.v1.org.created`.
pub async fn on_org_created(state: &AppState, env: Envelope<OrgCreated>) -> anyhow::Result<()> {
    ensure_creator_owner(state, env.data.org_id, env.data.owner_user_id).await?;
    Ok(())
}
