//! The demo catalog for dev and tests (`seed.skus`): one API-backed and one
//! manually fulfilled SKU in each currency the distributors use. Idempotent.

use sqlx::PgPool;

pub async fn skus(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO skus (id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position) VALUES \
         ('vps-small', 'VPS Small (2 vCPU, 4 GB)', 'api', NULL, '{nvme,ipv6,instant}', 49000, 'TRY', 1), \
         ('vps-large', 'VPS Large (8 vCPU, 16 GB)', 'api', NULL, '{nvme,ipv6,instant}', 159000, 'TRY', 2), \
         ('dedicated-gpu', 'Dedicated GPU server', 'manual', 48, '{gpu,dedicated,sla}', 1890000, 'TRY', 3), \
         ('vps-small-eu', 'VPS Small EU', 'api', NULL, '{nvme,ipv6,instant,eu}', 1200, 'EUR', 4) \
         ON CONFLICT (id) DO NOTHING",
    )
    .execute(pool)
    .await?;
    Ok(())
}
