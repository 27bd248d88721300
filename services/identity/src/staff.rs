//! Who is staff besides the configured bootstrap (`auth.staff_emails`): the
//! grants staff made through the API (`staff_grants`). The bearer lookup
//! reads a grant with the session ([`crate::sessions::live_by_hash`]); a
//! session is staff when its user is (by configuration or grant) and, with
//! `mfa.staff_required`, the session was opened through MFA.

use hub_domain::UserId;
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// How someone is staff.
#[derive(Serialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Listed in `auth.staff_emails`: changed only in configuration.
    Configured,
    /// Granted through `PUT /v1/admin/staff/{user_id}`.
    Granted,
}

/// One staff member as `GET /v1/admin/staff` lists them.
#[derive(Serialize)]
pub struct Member {
    /// Null for a configured address that has never signed in.
    pub user_id: Option<UserId>,
    pub email: String,
    pub source: Source,
    pub granted_by: Option<UserId>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub granted_at: Option<OffsetDateTime>,
}

/// Every staff member: the configured addresses (sorted), then the grants,
/// oldest first. A granted user whose address is also configured is listed
/// once, as configured.
pub async fn list(pool: &PgPool, configured: &[String]) -> sqlx::Result<Vec<Member>> {
    let mut configured: Vec<String> = configured.to_vec();
    configured.sort();
    let users = sqlx::query!(
        r#"SELECT id AS "id: UserId", email FROM users WHERE email = ANY($1)"#,
        &configured,
    )
    .fetch_all(pool)
    .await?;
    let mut out: Vec<Member> = configured
        .iter()
        .map(|email| Member {
            user_id: users.iter().find(|u| &u.email == email).map(|u| u.id),
            email: email.clone(),
            source: Source::Configured,
            granted_by: None,
            granted_at: None,
        })
        .collect();
    let grants = sqlx::query!(
        r#"SELECT g.user_id AS "user_id: UserId", u.email, g.granted_by AS "granted_by: UserId",
                  g.granted_at
             FROM staff_grants g JOIN users u ON u.id = g.user_id
            WHERE NOT (u.email = ANY($1))
            ORDER BY g.granted_at, g.user_id"#,
        &configured,
    )
    .fetch_all(pool)
    .await?;
    out.extend(grants.into_iter().map(|g| Member {
        user_id: Some(g.user_id),
        email: g.email,
        source: Source::Granted,
        granted_by: Some(g.granted_by),
        granted_at: Some(g.granted_at),
    }));
    Ok(out)
}

/// Grant staff to `user_id` (by `by`): false when they already had a grant.
pub async fn grant(conn: &mut PgConnection, user_id: UserId, by: UserId) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "INSERT INTO staff_grants (user_id, granted_by) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        user_id as UserId,
        by as UserId,
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Take `user_id`'s grant back: false when they had none.
pub async fn revoke(conn: &mut PgConnection, user_id: UserId) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "DELETE FROM staff_grants WHERE user_id = $1",
        user_id as UserId
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// The addresses of every staff member but `except`: the configured ones and
/// the granted users' (each once, sorted).
pub async fn addresses(
    conn: &mut PgConnection,
    configured: &[String],
    except: &str,
) -> sqlx::Result<Vec<String>> {
    let mut all: Vec<String> = sqlx::query_scalar!(
        "SELECT u.email FROM staff_grants g JOIN users u ON u.id = g.user_id \
          WHERE u.disabled_at IS NULL"
    )
    .fetch_all(conn)
    .await?;
    all.extend(configured.iter().cloned());
    all.sort();
    all.dedup();
    all.retain(|e| e != except);
    Ok(all)
}
