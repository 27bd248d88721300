//! Memberships: their storage (`memberships`, checked at compile time), the
//! per-organization lock and the announcement every change makes, the owner
//! rules ([`OrgRoles`]), and the creator-becomes-owner rule shared by the
//! internal fast path and the `core.v1.org.created` consumer.

use crate::state::AppState;
use event_contracts::{Envelope, IdentityChanged, MembershipChanged, Naming, OrgCreated};
use hub_domain::{ApiKeyId, OrgId, Role, UserId};
use serde::Serialize;
use service_kit::outbox;
use sqlx::{PgConnection, PgPool};

/// What a membership change may refuse, apart from database errors.
#[derive(Debug)]
pub enum Error {
    /// Only an owner may do this to the owner role; the message says what.
    OwnerOnly(&'static str),
    /// It would leave the organization without an owner; the message says how.
    LastOwner(&'static str),
    /// The user is not a member of the organization.
    NotMember,
    /// The user already belongs to this many organizations (the cap).
    AtCap(i64),
    Db(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e)
    }
}

/// A member as the organization's members see them.
#[derive(Serialize)]
pub struct Member {
    pub user_id: UserId,
    pub email: String,
    pub role: Role,
}

/// Every member of `org_id`, oldest membership first.
pub async fn of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Member>> {
    let rows = sqlx::query!(
        "SELECT m.user_id, u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id \
         WHERE m.org_id = $1 ORDER BY m.created_at, u.email",
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            let role = Role::parse(&r.role)
                .ok_or_else(|| sqlx::Error::Decode(format!("not a role: {:?}", r.role).into()))?;
            Ok(Member {
                user_id: r.user_id.into(),
                email: r.email,
                role,
            })
        })
        .collect()
}

/// Every member's role in one organization, read under its lock.
pub struct OrgRoles(Vec<(UserId, Role)>);

impl OrgRoles {
    /// The roles of `org_id` (lock it first: [`lock_org`]).
    pub async fn load(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<OrgRoles> {
        let rows = sqlx::query!(
            r#"SELECT user_id AS "user_id: UserId", role AS "role: Role" FROM memberships WHERE org_id = $1"#,
            org_id as OrgId,
        )
        .fetch_all(conn)
        .await?;
        Ok(OrgRoles(
            rows.into_iter().map(|r| (r.user_id, r.role)).collect(),
        ))
    }

    /// `user_id`'s role, if a member.
    pub fn of(&self, user_id: UserId) -> Option<Role> {
        self.0.iter().find(|(u, _)| *u == user_id).map(|(_, r)| *r)
    }

    /// An owner stops being one (demoted, leaving, removed): only an owner may
    /// do it, and never to the last owner.
    pub fn may_lose_owner(
        &self,
        caller_role: Role,
        not_owner: &'static str,
        last_owner: &'static str,
    ) -> Result<(), Error> {
        if caller_role != Role::Owner {
            return Err(Error::OwnerOnly(not_owner));
        }
        if self.0.iter().filter(|(_, r)| *r == Role::Owner).count() <= 1 {
            return Err(Error::LastOwner(last_owner));
        }
        Ok(())
    }
}

/// Refuse a new membership of `user_id` once they belong to `cap`
/// organizations (lock the user first: [`lock_user`]).
pub async fn check_cap(conn: &mut PgConnection, user_id: UserId, cap: i64) -> Result<(), Error> {
    let count: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM memberships WHERE user_id = $1"#,
        user_id as UserId,
    )
    .fetch_one(conn)
    .await?;
    if count >= cap {
        return Err(Error::AtCap(cap));
    }
    Ok(())
}

/// Make `user_id` a member of `org_id` with `role`, or change their role. A
/// new membership copies the organization's suspension (`org_states`); the
/// caller holds the organization's lock ([`lock_org`]), as the status
/// consumer does when it changes it.
pub async fn set_role(
    conn: &mut PgConnection,
    org_id: OrgId,
    user_id: UserId,
    role: Role,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO memberships (org_id, user_id, role, org_suspended) \
         VALUES ($1, $2, $3, EXISTS (SELECT 1 FROM org_states \
                                     WHERE org_id = $1 AND status = 'suspended')) \
             ON CONFLICT (org_id, user_id) DO UPDATE SET role = EXCLUDED.role, updated_at = now()",
        org_id as OrgId,
        user_id as UserId,
        role.as_str(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// End `user_id`'s membership of `org_id`.
pub async fn remove(conn: &mut PgConnection, org_id: OrgId, user_id: UserId) -> sqlx::Result<()> {
    sqlx::query!(
        "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2",
        org_id as OrgId,
        user_id as UserId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

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
    let revoked = crate::api_keys::revoke_created_by(&mut *conn, org_id, user_id).await?;
    crate::api_keys::enqueue_revoked(&mut *conn, naming, &revoked).await?;
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
        "INSERT INTO memberships (org_id, user_id, role, org_suspended) \
         SELECT $1, $2, 'owner', EXISTS (SELECT 1 FROM org_states \
                                         WHERE org_id = $1 AND status = 'suspended') \
          WHERE NOT EXISTS (SELECT 1 FROM memberships WHERE org_id = $1) \
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
