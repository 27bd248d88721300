//! Memberships: the creator-becomes-owner rule shared by the internal fast path
//! and the `core.v1.org.created` consumer.

use crate::state::AppState;
use event_contracts::{Envelope, IdentityChanged, MembershipChanged, OrgCreated};
use hub_domain::{OrgId, Role, UserId};
use service_kit::outbox;

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
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 1))")
        .bind(org_id)
        .execute(&mut *tx)
        .await?;
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
        outbox::enqueue(&mut tx, &state.naming, IdentityChanged { user_id }).await?;
        outbox::enqueue(
            &mut tx,
            &state.naming,
            MembershipChanged {
                org_id,
                user_id,
                role: Some(Role::Owner),
            },
        )
        .await?;
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
