//! The statements of usage billing (`usage_periods`, the SKU's price),
//! checked at compile time. Each takes the caller's transaction.

use hub_domain::{Currency, MinorUnits, OrgId, ServerId};
use sqlx::PgConnection;
use time::OffsetDateTime;

/// An open usage period, locked by the transaction that read it.
#[derive(Debug, Clone)]
pub struct Open {
    pub id: i64,
    pub server_id: ServerId,
    pub org_id: OrgId,
    pub sku_id: String,
    pub started_at: OffsetDateTime,
}

/// What a SKU costs now.
pub struct Price {
    pub name: String,
    pub monthly_price_minor: MinorUnits,
    pub currency: Currency,
}

/// Server `server`'s open usage period, if any, locked until the transaction
/// ends. Callers hold the server's row first (a lifecycle UPDATE, or
/// [`next_to_split`]), so this read comes after any concurrent split committed.
pub async fn lock_open(conn: &mut PgConnection, server: ServerId) -> sqlx::Result<Option<Open>> {
    sqlx::query_as!(
        Open,
        r#"SELECT id, server_id AS "server_id: ServerId", org_id AS "org_id: OrgId", sku_id, started_at
             FROM usage_periods WHERE server_id = $1 AND ended_at IS NULL FOR UPDATE"#,
        server as ServerId,
    )
    .fetch_optional(conn)
    .await
}

/// Close period `id` at `at`; false when it was closed already (a closed
/// period is never closed again).
pub async fn end(conn: &mut PgConnection, id: i64, at: OffsetDateTime) -> sqlx::Result<bool> {
    let n = sqlx::query!(
        "UPDATE usage_periods SET ended_at = $2 WHERE id = $1 AND ended_at IS NULL",
        id,
        at,
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Open the period that continues `prev` (same server, organization and SKU)
/// from `at`.
pub async fn continue_from(
    conn: &mut PgConnection,
    prev: &Open,
    at: OffsetDateTime,
) -> sqlx::Result<Open> {
    let id = sqlx::query_scalar!(
        "INSERT INTO usage_periods (server_id, org_id, sku_id, started_at) VALUES ($1, $2, $3, $4) RETURNING id",
        prev.server_id as ServerId,
        prev.org_id as OrgId,
        &prev.sku_id,
        at,
    )
    .fetch_one(conn)
    .await?;
    Ok(Open {
        id,
        started_at: at,
        ..prev.clone()
    })
}

/// SKU `id`'s name and current price.
pub async fn price(conn: &mut PgConnection, id: &str) -> sqlx::Result<Price> {
    sqlx::query_as!(
        Price,
        r#"SELECT name, monthly_price_minor AS "monthly_price_minor: MinorUnits", currency AS "currency: Currency"
             FROM skus WHERE id = $1"#,
        id,
    )
    .fetch_one(conn)
    .await
}

/// The next server (by id, after `after`) whose open usage period started
/// before `boundary`, with its hostname; its row locked until the transaction
/// ends (`FOR NO KEY UPDATE`, the lock a lifecycle change takes first), and a
/// server another transaction holds skipped (`SKIP LOCKED`): it is being
/// changed, and a closing period is split at close time anyway.
pub async fn next_to_split(
    conn: &mut PgConnection,
    boundary: OffsetDateTime,
    after: Option<ServerId>,
) -> sqlx::Result<Option<(ServerId, String)>> {
    let row = sqlx::query!(
        r#"SELECT s.id AS "id: ServerId", s.hostname FROM usage_periods p JOIN servers s ON s.id = p.server_id
          WHERE p.ended_at IS NULL AND p.started_at < $1 AND ($2::uuid IS NULL OR p.server_id > $2)
          ORDER BY p.server_id LIMIT 1 FOR NO KEY UPDATE OF s SKIP LOCKED"#,
        boundary,
        after as Option<ServerId>,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.id, r.hostname)))
}
