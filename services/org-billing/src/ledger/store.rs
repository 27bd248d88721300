//! Reads of the books (balances and the wallet's latest rows). Writes go
//! through the batch functions only ([`super::apply`]).

use hub_domain::OrgId;
use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;

/// One row of the wallet's ledger.
#[derive(Serialize)]
pub struct WalletTransaction {
    pub id: i64,
    pub delta_minor: i64,
    pub balance_after_minor: i64,
    pub kind: String,
    pub note: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// The wallet's `(currency, balance_minor)`; None when there is no such wallet.
pub async fn wallet(pool: &PgPool, org: OrgId) -> sqlx::Result<Option<(String, i64)>> {
    Ok(sqlx::query!(
        "SELECT currency, balance_minor FROM wallets WHERE org_id = $1",
        org as OrgId,
    )
    .fetch_optional(pool)
    .await?
    .map(|r| (r.currency, r.balance_minor)))
}

/// Up to `limit` of the wallet's ledger rows before row `before` (all when
/// None), newest first.
pub async fn transactions(
    pool: &PgPool,
    org: OrgId,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<WalletTransaction>> {
    sqlx::query_as!(
        WalletTransaction,
        "SELECT id, delta_minor, balance_after AS balance_after_minor, kind, note, created_at \
         FROM wallet_transactions WHERE org_id = $1 AND ($2::bigint IS NULL OR id < $2) \
         ORDER BY id DESC LIMIT $3",
        org as OrgId,
        before,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// The organization's AI-token balance; None when there is no such organization.
pub async fn token_balance(pool: &PgPool, org: OrgId) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "SELECT balance FROM token_balances WHERE org_id = $1",
        org as OrgId,
    )
    .fetch_optional(pool)
    .await
}
