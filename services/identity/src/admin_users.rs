//! Users as staff see them (`/v1/admin/users`): the search, one user's
//! memberships, sessions and second factor, and disabling a user. Checked at
//! compile time; functions take the caller's connection or transaction.

use hub_domain::{ApiKeyId, OrgId, Role, SessionId, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// A user in the staff search.
#[derive(Serialize)]
pub struct Summary {
    pub id: UserId,
    pub email: String,
    pub name: String,
    /// `active` or `disabled`.
    pub status: &'static str,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When their newest session was opened (null: never signed in).
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_sign_in_at: Option<OffsetDateTime>,
    pub mfa_enabled: bool,
}

fn status(disabled: bool) -> &'static str {
    if disabled {
        "disabled"
    } else {
        "active"
    }
}

/// What the staff search asks for.
pub struct Search<'a> {
    /// A user id (exact), or the start of an email or a name (any case).
    pub q: Option<&'a str>,
    /// Only disabled (`Some(true)`) or only active (`Some(false)`) users.
    pub disabled: Option<bool>,
    /// After this `(created_at, id)` (the previous page's last row).
    pub after: Option<(OffsetDateTime, uuid::Uuid)>,
    pub limit: i64,
}

/// Escape `%`, `_` and `\` for a LIKE pattern.
fn like_prefix(q: &str) -> String {
    let mut p = String::with_capacity(q.len() + 1);
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// Users matching `s`, newest first.
pub async fn search(pool: &PgPool, s: &Search<'_>) -> sqlx::Result<Vec<Summary>> {
    let q = s.q.map(str::trim).filter(|q| !q.is_empty());
    let id = q.and_then(|q| q.parse::<uuid::Uuid>().ok());
    let prefix = q
        .filter(|_| id.is_none())
        .map(|q| like_prefix(&q.to_lowercase()));
    let (after_at, after_id) = s.after.unzip();
    let rows = sqlx::query!(
        r#"SELECT u.id AS "id: UserId", u.email, u.name, u.created_at,
                  u.disabled_at IS NOT NULL AS "disabled!",
                  (SELECT max(created_at) FROM sessions s WHERE s.user_id = u.id) AS last_sign_in_at,
                  EXISTS (SELECT 1 FROM mfa WHERE mfa.user_id = u.id AND mfa.enabled_at IS NOT NULL)
                    AS "mfa_enabled!"
             FROM users u
            WHERE ($1::uuid IS NULL OR u.id = $1)
              AND ($2::text IS NULL OR u.email LIKE $2 OR lower(u.name) LIKE $2)
              AND ($3::boolean IS NULL OR (u.disabled_at IS NOT NULL) = $3)
              AND ($4::timestamptz IS NULL OR (u.created_at, u.id) < ($4, $5::uuid))
            ORDER BY u.created_at DESC, u.id DESC
            LIMIT $6"#,
        id,
        prefix,
        s.disabled,
        after_at,
        after_id,
        s.limit,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Summary {
            id: r.id,
            email: r.email,
            name: r.name,
            status: status(r.disabled),
            created_at: r.created_at,
            last_sign_in_at: r.last_sign_in_at,
            mfa_enabled: r.mfa_enabled,
        })
        .collect())
}

/// A membership of the user.
#[derive(Serialize)]
pub struct UserMembership {
    pub org_id: OrgId,
    pub role: Role,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// A live session of the user (never its token).
#[derive(Serialize)]
pub struct UserSession {
    pub id: SessionId,
    pub ip: String,
    /// Opened through the second factor.
    pub mfa: bool,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

/// One user as staff see them.
#[derive(Serialize)]
pub struct Detail {
    #[serde(flatten)]
    pub summary: Summary,
    /// Why staff disabled them (null while active).
    pub disabled_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub disabled_at: Option<OffsetDateTime>,
    /// Registered passkeys (none can be registered yet).
    pub passkeys: i64,
    pub memberships: Vec<UserMembership>,
    /// Live sessions, newest first (at most 200).
    pub sessions: Vec<UserSession>,
}

/// User `id` as staff see them; None when there is no such user.
pub async fn detail(pool: &PgPool, id: UserId) -> sqlx::Result<Option<Detail>> {
    let Some(u) = sqlx::query!(
        r#"SELECT u.id AS "id: UserId", u.email, u.name, u.created_at, u.disabled_at, u.disabled_reason,
                  (SELECT max(created_at) FROM sessions s WHERE s.user_id = u.id) AS last_sign_in_at,
                  EXISTS (SELECT 1 FROM mfa WHERE mfa.user_id = u.id AND mfa.enabled_at IS NOT NULL)
                    AS "mfa_enabled!"
             FROM users u WHERE u.id = $1"#,
        id as UserId,
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let memberships = sqlx::query!(
        r#"SELECT org_id AS "org_id: OrgId", role, created_at FROM memberships
            WHERE user_id = $1 ORDER BY created_at, org_id"#,
        id as UserId,
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|m| {
        let role = Role::parse(&m.role)
            .ok_or_else(|| sqlx::Error::Decode(format!("not a role: {:?}", m.role).into()))?;
        Ok(UserMembership {
            org_id: m.org_id,
            role,
            created_at: m.created_at,
        })
    })
    .collect::<sqlx::Result<Vec<_>>>()?;
    let sessions = sqlx::query_as!(
        UserSession,
        r#"SELECT id AS "id: SessionId", ip, mfa, created_at, expires_at FROM sessions
            WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now()
            ORDER BY created_at DESC LIMIT 200"#,
        id as UserId,
    )
    .fetch_all(pool)
    .await?;
    Ok(Some(Detail {
        summary: Summary {
            id: u.id,
            email: u.email,
            name: u.name,
            status: status(u.disabled_at.is_some()),
            created_at: u.created_at,
            last_sign_in_at: u.last_sign_in_at,
            mfa_enabled: u.mfa_enabled,
        },
        disabled_reason: u.disabled_reason,
        disabled_at: u.disabled_at,
        passkeys: 0,
        memberships,
        sessions,
    }))
}

/// Lock user `id` until the transaction ends; whether they are disabled, or
/// None when there is no such user.
pub async fn lock(conn: &mut PgConnection, id: UserId) -> sqlx::Result<Option<bool>> {
    sqlx::query_scalar!(
        r#"SELECT disabled_at IS NOT NULL AS "disabled!" FROM users WHERE id = $1 FOR UPDATE"#,
        id as UserId,
    )
    .fetch_optional(conn)
    .await
}

/// Whether user `id` is disabled (false for no such user).
pub async fn is_disabled(conn: &mut PgConnection, id: UserId) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT disabled_at IS NOT NULL AS "disabled!" FROM users WHERE id = $1"#,
        id as UserId,
    )
    .fetch_optional(conn)
    .await?
    .unwrap_or(false))
}

/// Disable (with `reason`) or enable (None) user `id`.
pub async fn set_disabled(
    conn: &mut PgConnection,
    id: UserId,
    reason: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE users SET disabled_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, \
         disabled_reason = $2, updated_at = now() WHERE id = $1",
        id as UserId,
        reason,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Revoke every live API key `id` created, in any organization: (key id,
/// token hash) of each.
pub async fn revoke_keys(
    conn: &mut PgConnection,
    id: UserId,
) -> sqlx::Result<Vec<(ApiKeyId, Vec<u8>)>> {
    Ok(sqlx::query!(
        r#"UPDATE api_keys SET revoked_at = now()
            WHERE created_by = $1 AND revoked_at IS NULL
            RETURNING id AS "id: ApiKeyId", token_hash"#,
        id as UserId,
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.token_hash))
    .collect())
}

#[cfg(test)]
mod tests {
    use super::like_prefix;

    #[test]
    fn a_search_prefix_matches_its_wildcards_literally() {
        assert_eq!(like_prefix("ay"), "ay%");
        assert_eq!(like_prefix("50%_a\\"), "50\\%\\_a\\\\%");
    }
}
