//! identity's storage of invitations (`invites`), checked at compile time:
//! create, list, revoke, the accept lookup, and the sweep. Functions take the
//! caller's connection or transaction; the handler decides the boundary and
//! takes the organization's lock ([`crate::memberships::lock_org`]) first.
//!
//! Only a token's SHA-256 is stored. A pending invite past `expires_at` is read
//! as `expired` at once (every read computes it); the sweep writes it so later.

use hub_domain::{Email, InviteId, OrgId, Role, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

hub_domain::text_enum! {
    /// Where an invite stands.
    pub enum Status: "invite status" {
        Pending = "pending",
        Accepted = "accepted",
        Revoked = "revoked",
        Expired = "expired",
    }
}

/// An invite as its organization's admins (and its invitee) see it; its
/// `status` reads `expired` past `expires_at`. The accept URL is added to the
/// creation answer only (`routes::invites`).
#[derive(Serialize, Debug)]
pub struct Invite {
    pub id: InviteId,
    pub org_id: OrgId,
    pub email: String,
    pub role: Role,
    pub status: Status,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

/// An invite to create.
pub struct NewInvite<'a> {
    pub org_id: OrgId,
    pub email: &'a Email,
    pub role: Role,
    pub token_hash: Vec<u8>,
    pub invited_by: UserId,
    pub ttl_secs: f64,
}

/// Whether `email` is already a member of `org_id`.
pub async fn is_member(
    conn: &mut PgConnection,
    org_id: OrgId,
    email: &Email,
) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
                          WHERE m.org_id = $1 AND u.email = $2) AS "member!""#,
        org_id as OrgId,
        email.as_str(),
    )
    .fetch_one(conn)
    .await
}

/// Mark the pending invites of `org_id` past their expiry expired, so that
/// new ones may take their place.
pub async fn expire_due(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE invites SET status = 'expired', updated_at = now() \
         WHERE org_id = $1 AND status = 'pending' AND expires_at <= now()",
        org_id as OrgId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Pending, unexpired invites of `org_id`.
pub async fn pending_count(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM invites
         WHERE org_id = $1 AND status = 'pending' AND expires_at > now()"#,
        org_id as OrgId,
    )
    .fetch_one(conn)
    .await
}

/// Store invite `i` under a new id; None when `i.email` already has a pending
/// invite to the organization (the unique pending index).
pub async fn create(conn: &mut PgConnection, i: NewInvite<'_>) -> sqlx::Result<Option<Invite>> {
    sqlx::query_as!(
        Invite,
        r#"INSERT INTO invites (id, org_id, email, role, token_hash, invited_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
         ON CONFLICT (org_id, email) WHERE status = 'pending' DO NOTHING
         RETURNING id AS "id: InviteId", org_id AS "org_id: OrgId", email, role AS "role: Role",
                   status AS "status: Status", created_at, expires_at"#,
        InviteId::new() as InviteId,
        i.org_id as OrgId,
        i.email.as_str(),
        i.role.as_str(),
        i.token_hash,
        i.invited_by as UserId,
        i.ttl_secs,
    )
    .fetch_optional(conn)
    .await
}

/// Every invite of `org_id`, newest first, at most 500.
pub async fn of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Invite>> {
    sqlx::query_as!(
        Invite,
        r#"SELECT id AS "id: InviteId", org_id AS "org_id: OrgId", email, role AS "role: Role",
                  (CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired'
                        ELSE status END) AS "status!: Status",
                  created_at, expires_at
         FROM invites WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT 500"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// Invite `id` of `org_id`, the row locked until the transaction ends.
pub async fn lock(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: InviteId,
) -> sqlx::Result<Option<Invite>> {
    sqlx::query_as!(
        Invite,
        r#"SELECT id AS "id: InviteId", org_id AS "org_id: OrgId", email, role AS "role: Role",
                  (CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired'
                        ELSE status END) AS "status!: Status",
                  created_at, expires_at
         FROM invites WHERE org_id = $1 AND id = $2 FOR UPDATE"#,
        org_id as OrgId,
        id as InviteId,
    )
    .fetch_optional(conn)
    .await
}

/// The organization of the invite whose token hashes to `token_hash`, if any
/// (read without a lock: the handler locks the organization, then the row).
pub async fn org_of_token(
    conn: &mut PgConnection,
    token_hash: &[u8],
) -> sqlx::Result<Option<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT org_id AS "org_id: OrgId" FROM invites WHERE token_hash = $1"#,
        token_hash,
    )
    .fetch_optional(conn)
    .await
}

/// The invite whose token hashes to `token_hash`, the row locked.
pub async fn lock_by_token(
    conn: &mut PgConnection,
    token_hash: &[u8],
) -> sqlx::Result<Option<Invite>> {
    sqlx::query_as!(
        Invite,
        r#"SELECT id AS "id: InviteId", org_id AS "org_id: OrgId", email, role AS "role: Role",
                  (CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired'
                        ELSE status END) AS "status!: Status",
                  created_at, expires_at
         FROM invites WHERE token_hash = $1 FOR UPDATE"#,
        token_hash,
    )
    .fetch_optional(conn)
    .await
}

/// Move a pending invite to `to` (revoked, accepted by `accepted_by`); whether
/// it was pending (and unexpired).
pub async fn settle(
    conn: &mut PgConnection,
    id: InviteId,
    to: Status,
    accepted_by: Option<UserId>,
) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "UPDATE invites SET status = $2, accepted_by = $3, updated_at = now() \
         WHERE id = $1 AND status = 'pending' AND expires_at > now()",
        id as InviteId,
        to as Status,
        accepted_by as Option<UserId>,
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Whether the invite with `token_hash` may still be mailed (the mail worker
/// drops mail of invites accepted, revoked or expired meanwhile).
pub async fn mailable(pool: &PgPool, token_hash: &[u8]) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT status = 'pending' AND expires_at > now() AS "live!" FROM invites
         WHERE token_hash = $1"#,
        token_hash,
    )
    .fetch_optional(pool)
    .await?
    .unwrap_or(false))
}

/// The sweep: pending invites past their expiry become `expired`; invites
/// settled (accepted, revoked, expired) longer than `keep_secs` ago go.
pub async fn sweep(pool: &PgPool, keep_secs: i64) -> sqlx::Result<u64> {
    let mut n = sqlx::query!(
        "UPDATE invites SET status = 'expired', updated_at = now() \
         WHERE status = 'pending' AND expires_at <= now()",
    )
    .execute(pool)
    .await?
    .rows_affected();
    n += sqlx::query!(
        "DELETE FROM invites WHERE status <> 'pending' \
         AND updated_at < now() - make_interval(secs => $1)",
        keep_secs as f64,
    )
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}
