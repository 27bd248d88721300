//! identity's storage of sign-in: magic links (`magic_links`) and sessions
//! (`sessions`), and the bearer lookup of a session ([`live_by_hash`], for
//! [`crate::resolve`]), checked at compile time. Functions take the caller's
//! connection or transaction; the handler decides the transaction boundary.

use event_contracts::{CredentialRevoked, Naming};
use hub_domain::{CredentialKind, Membership, SessionId, UserId};
use service_kit::outbox;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// What a sign-in step may refuse, apart from database errors.
#[derive(Debug)]
pub enum Error {
    /// The magic-link token is unknown, expired or already used.
    UnusableLink,
    /// No such live session of this user (unknown, someone else's, revoked
    /// or expired).
    NotFound,
    Db(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e)
    }
}

/// A live session as its owner lists it; `current` is false until the route
/// marks the caller's own.
#[derive(serde::Serialize)]
pub struct Active {
    pub id: SessionId,
    pub ip: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    pub current: bool,
}

/// Store a magic link for `user_id` (only the token's hash), valid `ttl_secs`.
pub async fn issue_link(
    conn: &mut PgConnection,
    token_hash: Vec<u8>,
    user_id: UserId,
    ttl_secs: f64,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO magic_links (token_hash, user_id, expires_at) \
         VALUES ($1, $2, now() + make_interval(secs => $3))",
        token_hash,
        user_id as UserId,
        ttl_secs,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Mark the link with `token_hash` used and return its user. The UPDATE locks
/// the row, so of concurrent redemptions of one token exactly one succeeds.
pub async fn redeem_link(conn: &mut PgConnection, token_hash: Vec<u8>) -> Result<UserId, Error> {
    sqlx::query_scalar!(
        "UPDATE magic_links SET used_at = now() \
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() \
         RETURNING user_id AS \"user_id: UserId\"",
        token_hash,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(Error::UnusableLink)
}

/// A session to open.
pub struct NewSession<'a> {
    pub id: SessionId,
    pub user_id: UserId,
    pub token_hash: Vec<u8>,
    pub ip: &'a str,
    pub ttl_secs: f64,
    /// Opened through a second factor (MFA).
    pub mfa: bool,
    /// How it was opened (RFC 8176 `amr` values).
    pub amr: Vec<String>,
    /// The passkey it was opened with, if one was.
    pub passkey_id: Option<uuid::Uuid>,
}

/// Open session `s`, valid `s.ttl_secs` from now.
pub async fn open(conn: &mut PgConnection, s: NewSession<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO sessions (id, user_id, token_hash, ip, expires_at, mfa, amr, passkey_id) \
         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5), $6, $7, $8)",
        s.id as SessionId,
        s.user_id as UserId,
        s.token_hash,
        s.ip,
        s.ttl_secs,
        s.mfa,
        &s.amr,
        s.passkey_id,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Revoke live session `id` of `user_id`; returns its token hash (for the
/// revocation event).
pub async fn revoke(
    conn: &mut PgConnection,
    id: SessionId,
    user_id: UserId,
) -> Result<Vec<u8>, Error> {
    sqlx::query_scalar!(
        "UPDATE sessions SET revoked_at = now() \
         WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL AND expires_at > now() \
         RETURNING token_hash",
        id as SessionId,
        user_id as UserId,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(Error::NotFound)
}

/// Revoke every live session of `user_id` but `keep` (all when None): (id,
/// token hash) of each, for [`enqueue_revoked`].
pub async fn revoke_all(
    conn: &mut PgConnection,
    user_id: UserId,
    keep: Option<SessionId>,
) -> sqlx::Result<Vec<(SessionId, Vec<u8>)>> {
    Ok(sqlx::query!(
        r#"UPDATE sessions SET revoked_at = now()
         WHERE user_id = $1 AND ($2::uuid IS NULL OR id <> $2)
           AND revoked_at IS NULL AND expires_at > now()
         RETURNING id AS "id: SessionId", token_hash"#,
        user_id as UserId,
        keep as Option<SessionId>,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.token_hash))
    .collect())
}

/// Revoke every live session of `user_id` opened with passkey `passkey_id`
/// (it was deleted) but `keep` (the one deleting it); their ids and token
/// hashes.
pub async fn revoke_opened_with(
    conn: &mut PgConnection,
    user_id: UserId,
    passkey_id: uuid::Uuid,
    keep: SessionId,
) -> sqlx::Result<Vec<(SessionId, Vec<u8>)>> {
    Ok(sqlx::query!(
        r#"UPDATE sessions SET revoked_at = now()
         WHERE user_id = $1 AND passkey_id = $2 AND id <> $3
           AND revoked_at IS NULL AND expires_at > now()
         RETURNING id AS "id: SessionId", token_hash"#,
        user_id as UserId,
        passkey_id,
        keep as SessionId,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.token_hash))
    .collect())
}

/// Queue one `CredentialRevoked` per revoked session of `user_id` (caller's
/// transaction), so every gateway drops them.
pub async fn enqueue_revoked(
    conn: &mut PgConnection,
    naming: &Naming,
    user_id: UserId,
    revoked: &[(SessionId, Vec<u8>)],
) -> anyhow::Result<()> {
    for (id, hash) in revoked {
        outbox::enqueue(
            &mut *conn,
            naming,
            CredentialRevoked {
                user_id,
                credential_kind: CredentialKind::Session.as_str().into(),
                credential_id: id.as_uuid(),
                token_hash: hex::encode(hash),
            },
        )
        .await?;
    }
    Ok(())
}

/// `user_id`'s live sessions, newest first (at most 200).
pub async fn active(pool: &PgPool, user_id: UserId) -> sqlx::Result<Vec<Active>> {
    sqlx::query_as!(
        Active,
        r#"SELECT id AS "id: SessionId", ip, created_at, expires_at, false AS "current!" FROM sessions
         WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now()
         ORDER BY created_at DESC LIMIT 200"#,
        user_id as UserId,
    )
    .fetch_all(pool)
    .await
}

/// A live session as the bearer lookup finds it: its user, with every
/// membership (oldest first), and when it expires.
pub struct Live {
    pub id: SessionId,
    pub user_id: UserId,
    pub email: String,
    pub name: String,
    pub memberships: Vec<Membership>,
    pub expires_at: OffsetDateTime,
    /// Opened through a second factor.
    pub mfa: bool,
    /// The user holds a staff grant ([`crate::staff`]).
    pub staff_granted: bool,
}

/// The live session `id`, if any: [`live_by_hash`] by the session's id (an
/// access token of the OpenID Provider names its session).
pub async fn live_by_id(pool: &PgPool, id: SessionId) -> sqlx::Result<Option<Live>> {
    let row = sqlx::query!(
        r#"SELECT s.id AS "id: SessionId", s.expires_at, s.mfa, u.id AS "user_id: UserId",
                  u.email, u.name,
           COALESCE((SELECT json_agg(
                               CASE WHEN m.org_closed
                                    THEN json_build_object('org_id', m.org_id, 'role', m.role,
                                                           'status', 'closed')
                                    WHEN m.org_suspended
                                    THEN json_build_object('org_id', m.org_id, 'role', m.role,
                                                           'status', 'suspended')
                                    ELSE json_build_object('org_id', m.org_id, 'role', m.role) END
                               ORDER BY m.created_at, m.org_id)
                     FROM memberships m WHERE m.user_id = u.id), '[]'::json)
             AS "memberships!: sqlx::types::Json<Vec<Membership>>",
           EXISTS (SELECT 1 FROM staff_grants g WHERE g.user_id = u.id) AS "staff_granted!"
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
           AND u.disabled_at IS NULL"#,
        id as SessionId,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Live {
        id: r.id,
        user_id: r.user_id,
        email: r.email,
        name: r.name,
        memberships: r.memberships.0,
        expires_at: r.expires_at,
        mfa: r.mfa,
        staff_granted: r.staff_granted,
    }))
}

/// The live session whose token hashes to `token_hash`, if any: one indexed
/// lookup with the memberships folded in as JSON (the hot path of every
/// request with a session).
pub async fn live_by_hash(pool: &PgPool, token_hash: &[u8]) -> sqlx::Result<Option<Live>> {
    let row = sqlx::query!(
        r#"SELECT s.id AS "id: SessionId", s.expires_at, s.mfa, u.id AS "user_id: UserId",
                  u.email, u.name,
           COALESCE((SELECT json_agg(
                               CASE WHEN m.org_closed
                                    THEN json_build_object('org_id', m.org_id, 'role', m.role,
                                                           'status', 'closed')
                                    WHEN m.org_suspended
                                    THEN json_build_object('org_id', m.org_id, 'role', m.role,
                                                           'status', 'suspended')
                                    ELSE json_build_object('org_id', m.org_id, 'role', m.role) END
                               ORDER BY m.created_at, m.org_id)
                     FROM memberships m WHERE m.user_id = u.id), '[]'::json)
             AS "memberships!: sqlx::types::Json<Vec<Membership>>",
           EXISTS (SELECT 1 FROM staff_grants g WHERE g.user_id = u.id) AS "staff_granted!"
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
           AND u.disabled_at IS NULL"#,
        token_hash,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Live {
        id: r.id,
        user_id: r.user_id,
        email: r.email,
        name: r.name,
        memberships: r.memberships.0,
        expires_at: r.expires_at,
        mfa: r.mfa,
        staff_granted: r.staff_granted,
    }))
}
