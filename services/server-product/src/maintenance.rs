//! server-product's storage of maintenance windows (`maintenance_windows`),
//! checked at compile time.

use hub_domain::{MaintenanceId, UserId};
use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;

/// A maintenance window as everyone sees it.
#[derive(Serialize)]
pub struct Window {
    pub id: MaintenanceId,
    pub title: String,
    pub description: String,
    #[serde(with = "time::serde::rfc3339")]
    pub starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub ends_at: OffsetDateTime,
}

/// A window to add.
pub struct NewWindow<'a> {
    pub title: &'a str,
    pub description: &'a str,
    pub starts_at: OffsetDateTime,
    pub ends_at: OffsetDateTime,
    pub created_by: UserId,
    pub at: OffsetDateTime,
}

/// Store window `w` under a new id.
pub async fn add(pool: &PgPool, w: NewWindow<'_>) -> sqlx::Result<Window> {
    sqlx::query_as!(
        Window,
        r#"INSERT INTO maintenance_windows (id, title, description, starts_at, ends_at, created_by, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           RETURNING id AS "id: MaintenanceId", title, description, starts_at, ends_at"#,
        MaintenanceId::new() as MaintenanceId,
        w.title,
        w.description,
        w.starts_at,
        w.ends_at,
        w.created_by as UserId,
        w.at,
    )
    .fetch_one(pool)
    .await
}

/// Windows not over at `now`, soonest first (at most 200).
pub async fn upcoming(pool: &PgPool, now: OffsetDateTime) -> sqlx::Result<Vec<Window>> {
    sqlx::query_as!(
        Window,
        r#"SELECT id AS "id: MaintenanceId", title, description, starts_at, ends_at FROM maintenance_windows
           WHERE ends_at > $1 ORDER BY starts_at, id LIMIT 200"#,
        now,
    )
    .fetch_all(pool)
    .await
}
