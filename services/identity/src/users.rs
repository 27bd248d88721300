//! identity's storage of users (`users`): the upsert shared by sign-in and
//! administrative member adds, the display name, the profile and the
//! timezone lookup, checked at compile time.

use hub_domain::Email;
use hub_domain::UserId;
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

/// A user's profile as its owner reads and edits it.
#[derive(Serialize, Clone, PartialEq)]
pub struct Profile {
    pub email: String,
    pub name: String,
    pub phone: String,
    pub job_title: String,
    pub timezone: String,
    pub locale: String,
    pub bio: String,
}

/// The id of the user with `email`, creating the user when missing.
pub async fn upsert_by_email(conn: &mut PgConnection, email: &Email) -> sqlx::Result<UserId> {
    sqlx::query_scalar!(
        "INSERT INTO users (id, email) VALUES ($1, $2) \
         ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id AS \"id: UserId\"",
        UserId::new() as UserId,
        email.as_str(),
    )
    .fetch_one(conn)
    .await
}

/// `id`'s display name, the row locked until the transaction ends.
pub async fn lock_name(conn: &mut PgConnection, id: UserId) -> sqlx::Result<String> {
    sqlx::query_scalar!(
        "SELECT name FROM users WHERE id = $1 FOR NO KEY UPDATE",
        id as UserId,
    )
    .fetch_one(conn)
    .await
}

/// Set `id`'s display name.
pub async fn set_name(conn: &mut PgConnection, id: UserId, name: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE users SET name = $2, updated_at = now() WHERE id = $1",
        id as UserId,
        name,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// `id`'s profile.
pub async fn profile(pool: &PgPool, id: UserId) -> sqlx::Result<Profile> {
    sqlx::query_as!(
        Profile,
        "SELECT email, name, phone, job_title, timezone, locale, bio FROM users WHERE id = $1",
        id as UserId,
    )
    .fetch_one(pool)
    .await
}

/// `id`'s profile, the row locked until the transaction ends.
pub async fn lock_profile(conn: &mut PgConnection, id: UserId) -> sqlx::Result<Profile> {
    sqlx::query_as!(
        Profile,
        "SELECT email, name, phone, job_title, timezone, locale, bio FROM users WHERE id = $1 \
         FOR UPDATE",
        id as UserId,
    )
    .fetch_one(conn)
    .await
}

/// Store `p` as `id`'s profile (every editable field; the email stays).
pub async fn set_profile(conn: &mut PgConnection, id: UserId, p: &Profile) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE users SET name = $2, phone = $3, job_title = $4, timezone = $5, \
         locale = $6, bio = $7, updated_at = now() WHERE id = $1",
        id as UserId,
        &p.name,
        &p.phone,
        &p.job_title,
        &p.timezone,
        &p.locale,
        &p.bio,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The timezone of each of `ids` that exists, as (id, IANA name).
pub async fn timezones(pool: &PgPool, ids: &[UserId]) -> sqlx::Result<Vec<(UserId, String)>> {
    let rows = sqlx::query!(
        r#"SELECT id AS "id: UserId", timezone FROM users WHERE id = ANY($1)"#,
        ids as &[UserId],
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.timezone)).collect())
}
