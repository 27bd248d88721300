//! User rows shared by sign-in and administrative member adds.

use hub_domain::Email;
use sqlx::PgConnection;
use uuid::Uuid;

/// The id of the user with `email`, creating the user when missing.
pub async fn upsert_by_email(conn: &mut PgConnection, email: &Email) -> sqlx::Result<Uuid> {
    sqlx::query_scalar(
        "INSERT INTO users (id, email) VALUES ($1, $2) \
         ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id",
    )
    .bind(Uuid::now_v7())
    .bind(email.as_str())
    .fetch_one(conn)
    .await
}
