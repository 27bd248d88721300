//! A user's own personal data: the export (`GET /v1/auth/me/export`,
//! identity's part; the gateway adds the agent's) and the deletion of the
//! account (`DELETE /v1/auth/me`). What is erased, what is pseudonymized and
//! what is kept is decided per kind of data in decisions.md ("Deleting an
//! account").

use crate::audit::Entry;
use hub_domain::{ApiKeyId, OrgId, SessionId, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// Most sessions and audit entries an export lists (newest first); older
/// audit entries stay readable through `/v1/audit/me`'s cursor.
pub const EXPORT_SESSIONS: i64 = 1_000;
pub const EXPORT_AUDIT: i64 = 10_000;

#[derive(Serialize)]
pub struct Profile {
    pub user_id: UserId,
    pub email: String,
    pub name: String,
    pub phone: String,
    pub job_title: String,
    pub timezone: String,
    pub locale: String,
    pub bio: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

#[derive(Serialize)]
pub struct Membership {
    pub org_id: OrgId,
    pub role: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

#[derive(Serialize)]
pub struct Session {
    pub id: SessionId,
    pub ip: String,
    pub mfa: bool,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

#[derive(Serialize)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub org_id: OrgId,
    pub name: String,
    pub role: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

/// identity's part of a user's export. Never a token, a hash or a secret.
#[derive(Serialize)]
pub struct Export {
    #[serde(with = "time::serde::rfc3339")]
    pub exported_at: OffsetDateTime,
    pub profile: Profile,
    pub mfa_enabled: bool,
    pub memberships: Vec<Membership>,
    /// Newest first, at most [`EXPORT_SESSIONS`].
    pub sessions: Vec<Session>,
    /// The API keys they created (the keys themselves are never stored).
    pub api_keys_created: Vec<ApiKey>,
    /// Their passkeys (names and dates; never key material).
    pub passkeys: Vec<crate::passkeys::View>,
    /// What they did, newest first, at most [`EXPORT_AUDIT`].
    pub audit: Vec<Entry>,
    /// More audit entries exist than the export lists.
    pub audit_truncated: bool,
}

/// `id`'s export (one snapshot: a repeatable-read transaction).
pub async fn export(pool: &PgPool, id: UserId) -> sqlx::Result<Export> {
    let mut tx = pool.begin().await?;
    sqlx::query!("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let profile = sqlx::query_as!(
        Profile,
        r#"SELECT id AS "user_id: UserId", email, name, phone, job_title, timezone, locale, bio,
                  created_at FROM users WHERE id = $1"#,
        id as UserId,
    )
    .fetch_one(&mut *tx)
    .await?;
    let mfa_enabled = crate::mfa::is_enabled(&mut tx, id).await?;
    let memberships = sqlx::query_as!(
        Membership,
        "SELECT org_id AS \"org_id: OrgId\", role, created_at FROM memberships \
          WHERE user_id = $1 ORDER BY created_at, org_id",
        id as UserId,
    )
    .fetch_all(&mut *tx)
    .await?;
    let sessions = sqlx::query_as!(
        Session,
        r#"SELECT id AS "id: SessionId", ip, mfa, created_at, expires_at, revoked_at FROM sessions
            WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"#,
        id as UserId,
        EXPORT_SESSIONS,
    )
    .fetch_all(&mut *tx)
    .await?;
    let api_keys_created = sqlx::query_as!(
        ApiKey,
        r#"SELECT id AS "id: ApiKeyId", org_id AS "org_id: OrgId", name, role, created_at, revoked_at
             FROM api_keys WHERE created_by = $1 ORDER BY created_at, id"#,
        id as UserId,
    )
    .fetch_all(&mut *tx)
    .await?;
    let passkeys = crate::passkeys::list(&mut tx, id).await?;
    let mut audit = sqlx::query_as!(
        Entry,
        r#"SELECT id, actor_user_id AS "actor_user_id: UserId", action, subject, detail, ip, created_at
             FROM audit_log WHERE actor_user_id = $1 ORDER BY id DESC LIMIT $2"#,
        id as UserId,
        EXPORT_AUDIT + 1,
    )
    .fetch_all(&mut *tx)
    .await?;
    let audit_truncated = audit.len() as i64 > EXPORT_AUDIT;
    audit.truncate(EXPORT_AUDIT as usize);
    tx.commit().await?;
    Ok(Export {
        exported_at: OffsetDateTime::now_utc(),
        profile,
        mfa_enabled,
        memberships,
        sessions,
        api_keys_created,
        passkeys,
        audit,
        audit_truncated,
    })
}

/// The organizations `id` is the only owner of (a deletion would leave them
/// without one); a closed organization needs no owner any more.
pub async fn sole_owner_of(conn: &mut PgConnection, id: UserId) -> sqlx::Result<Vec<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT m.org_id AS "org_id: OrgId" FROM memberships m
            WHERE m.user_id = $1 AND m.role = 'owner' AND NOT m.org_closed
              AND NOT EXISTS (SELECT 1 FROM memberships o
                               WHERE o.org_id = m.org_id AND o.role = 'owner' AND o.user_id <> $1)
            ORDER BY m.org_id"#,
        id as UserId,
    )
    .fetch_all(conn)
    .await
}

/// Whether `id` deleted their account.
pub async fn is_deleted(conn: &mut PgConnection, id: UserId) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT deleted_at IS NOT NULL AS "deleted!" FROM users WHERE id = $1"#,
        id as UserId,
    )
    .fetch_optional(conn)
    .await?
    .unwrap_or(false))
}

/// The organizations `id` belongs to (every membership ends with the account).
pub async fn organizations(conn: &mut PgConnection, id: UserId) -> sqlx::Result<Vec<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT org_id AS "org_id: OrgId" FROM memberships WHERE user_id = $1 ORDER BY org_id"#,
        id as UserId,
    )
    .fetch_all(conn)
    .await
}

/// Erase what identity holds of `id` as a person (caller's transaction, the
/// memberships already ended, sessions and keys already revoked): the
/// profile fields are emptied and the address replaced by a pseudonym that
/// can never receive mail; the second factor, staff grant, sign-in links,
/// challenges and queued mail are deleted; the IPs of their sessions and of
/// their audit entries are erased (the entries stay, under the pseudonymous
/// id); invitations to the address are revoked. The row stays disabled, so
/// nothing of it resolves again.
pub async fn erase(conn: &mut PgConnection, id: UserId, email: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE users SET email = 'deleted-' || id || '@deleted.invalid', name = '', phone = '', \
                job_title = '', bio = '', timezone = 'UTC', locale = 'en', \
                disabled_at = now(), disabled_reason = 'account deleted', deleted_at = now(), \
                updated_at = now() \
          WHERE id = $1",
        id as UserId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM mfa_recovery_codes WHERE user_id = $1",
        id as UserId
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM mfa_challenges WHERE user_id = $1",
        id as UserId
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM mfa WHERE user_id = $1", id as UserId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM passkeys WHERE user_id = $1", id as UserId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        "DELETE FROM passkey_challenges WHERE user_id = $1",
        id as UserId
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM magic_links WHERE user_id = $1", id as UserId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM staff_grants WHERE user_id = $1", id as UserId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        "UPDATE sessions SET ip = '' WHERE user_id = $1",
        id as UserId
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE audit_log SET ip = '' WHERE actor_user_id = $1",
        id as UserId
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM mail_queue WHERE recipient = $1", email)
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        "UPDATE invites SET status = 'revoked' WHERE email = $1 AND status = 'pending'",
        email
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
