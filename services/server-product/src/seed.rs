//! The demo catalog for dev and tests (`seed.skus`): the SKUs of the
//! compiled-in demo catalog ([`hub_domain::catalog::DEMO_JSON`]), API-backed
//! and manually fulfilled ones in each currency the demo distributors use,
//! applied like a declared catalog ([`crate::catalog`]) but inserting only
//! what is missing. Idempotent.

use crate::catalog::{self, Mode};
use sqlx::PgPool;

pub async fn skus(pool: &PgPool) -> anyhow::Result<()> {
    let demo = hub_domain::catalog::Catalog::demo();
    anyhow::ensure!(!demo.skus.is_empty(), "the demo catalog has no SKUs");
    catalog::apply(pool, &demo.skus, Mode::Missing).await?;
    Ok(())
}
