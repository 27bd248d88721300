//! User rows shared by sign-in and administrative member adds.

use hub_domain::Email;
use hub_domain::UserId;
use sqlx::PgConnection;

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
