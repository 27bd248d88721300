//! The membership replica (from identity's `core.v1.membership.changed`), kept
//! for member counts. Older events never overwrite newer ones.

use event_contracts::{Envelope, MembershipChanged};
use hub_domain::{OrgId, UserId};
use sqlx::PgPool;

pub async fn apply(pool: &PgPool, env: Envelope<MembershipChanged>) -> anyhow::Result<()> {
    let e = env.data;
    match e.role {
        Some(role) => {
            sqlx::query!(
                "INSERT INTO org_members (org_id, user_id, role, changed_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (org_id, user_id) DO UPDATE SET role = EXCLUDED.role, changed_at = EXCLUDED.changed_at \
                 WHERE org_members.changed_at <= EXCLUDED.changed_at",
                e.org_id as OrgId,
                e.user_id as UserId,
                role.as_str(),
                env.occurred_at,
            )
            .execute(pool)
            .await?;
        }
        None => {
            sqlx::query!(
                "DELETE FROM org_members WHERE org_id = $1 AND user_id = $2 AND changed_at <= $3",
                e.org_id as OrgId,
                e.user_id as UserId,
                env.occurred_at,
            )
            .execute(pool)
            .await?;
        }
    }
    Ok(())
}
