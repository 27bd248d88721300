//! Staff's choice of model (`model_choice`, one row).

use hub_domain::UserId;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// The model staff chose, if any.
pub async fn chosen(pool: &PgPool) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!("SELECT model FROM model_choice",)
        .fetch_optional(pool)
        .await
}

/// Staff `by` chooses `name`.
pub async fn choose(
    conn: &mut PgConnection,
    name: &str,
    by: UserId,
    at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO model_choice (id, model, set_by, updated_at) VALUES (true, $1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET model = EXCLUDED.model, set_by = EXCLUDED.set_by, updated_at = EXCLUDED.updated_at",
        name,
        by as UserId,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}
