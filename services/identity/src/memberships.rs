//! Memberships: the per-organization lock and the announcement every change
//! makes, and the creator-becomes-owner rule shared by the internal fast path
//! and the `core.v1.org.created` consumer.

use crate::state::AppState;
use event_contracts::{
    CredentialRevoked, Envelope, IdentityChanged, MembershipChanged, Naming, OrgCreated,
};
use hub_domain::{ApiKeyId, OrgId, Role, UserId};
use service_kit::outbox;
use sqlx::PgConnection;

/// Whether `role` has admin authority (manages members and API keys).
pub fn is_admin(role: Option<Role>) -> bool {
    matches!(role, Some(Role::Owner | Role::Manager))
}

/// Revoke, in the caller's transaction, every live API key of `org_id` that
/// `user_id` created: a member who loses admin authority (or leaves) must not
/// keep it through keys. Each revocation is announced like a key revoke
/// (`core.v1.auth.credential_revoked`), so gateways drop the keys at once.
/// Returns the revoked key ids.
pub async fn revoke_keys_created_by(
    conn: &mut PgConnection,
    naming: &Naming,
    org_id: OrgId,
    user_id: UserId,
) -> anyhow::Result<Vec<ApiKeyId>> {
    let revoked: Vec<(ApiKeyId, Vec<u8>)> = sqlx::query!(
        r#"UPDATE api_keys SET revoked_at = now()
           WHERE org_id = $1 AND created_by = $2 AND revoked_at IS NULL
           RETURNING id AS "id: ApiKeyId", token_hash"#,
        org_id as OrgId,
        user_id as UserId,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.token_hash))
    .collect();
    for (id, hash) in &revoked {
        outbox::enqueue(
            &mut *conn,
            naming,
            CredentialRevoked {
                user_id: id.as_principal(),
                credential_kind: "api_key".into(),
                credential_id: id.as_uuid(),
                token_hash: hex::encode(hash),
            },
        )
        .await?;
    }
    Ok(revoked.into_iter().map(|(id, _)| id).collect())
}

/// Serialize membership changes of `user_id` across organizations (the cap).
pub async fn lock_user(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 2))",
        user_id.to_string(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Serialize membership changes of `org_id` (adds, role changes, the first
/// owner) until the transaction ends.
pub async fn lock_org(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 1))",
        org_id.to_string(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Tell the gateways (`identity.changed`) and org-billing's replica
/// (`membership.changed`) that `user_id` now has `role` in `org_id` (`None`:
/// no longer a member).
pub async fn announce(
    conn: &mut PgConnection,
    naming: &Naming,
    org_id: OrgId,
    user_id: UserId,
    role: Option<Role>,
) -> anyhow::Result<()> {
    outbox::enqueue(&mut *conn, naming, IdentityChanged { user_id }).await?;
    outbox::enqueue(
        conn,
        naming,
        MembershipChanged {
            org_id,
            user_id,
            role,
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
    let inserted = sqlx::query!(
        "INSERT INTO memberships (org_id, user_id, role) \
         SELECT $1, $2, 'owner' WHERE NOT EXISTS (SELECT 1 FROM memberships WHERE org_id = $1) \
           AND EXISTS (SELECT 1 FROM users WHERE id = $2) \
         ON CONFLICT DO NOTHING",
        org_id as OrgId,
        user_id as UserId,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if inserted {
        announce(&mut tx, &state.naming, org_id, user_id, Some(Role::Owner)).await?;
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
