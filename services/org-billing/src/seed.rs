//! The dev/test seed (`seed.distributors`): the distributors of the
//! compiled-in demo catalog ([`hub_domain::catalog::DEMO_JSON`]), a domestic
//! entity for Turkey and one EU entity (VAT OSS) covering all 27 member
//! states, applied like a declared catalog ([`crate::catalog`]) but inserting
//! only what is missing. Idempotent (fixed ids).

use crate::catalog::{self, Mode};
use sqlx::PgPool;

pub async fn distributors(pool: &PgPool) -> anyhow::Result<()> {
    let demo = hub_domain::catalog::Catalog::demo();
    anyhow::ensure!(
        !demo.distributors.is_empty(),
        "the demo catalog has no distributors"
    );
    catalog::apply(pool, &demo.distributors, Mode::Missing).await?;
    Ok(())
}
