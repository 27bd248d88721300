//! The SKU part of the declared catalog ([`hub_domain::catalog`]), applied in
//! one transaction: all of it, or nothing.
//!
//! [`Mode::Declared`] (`catalog.file`, the `migrate` subcommand): the file is
//! authoritative for what it lists. A SKU is inserted, or its declared fields
//! updated (name, price, SLA; badges, position and listed when given). SKUs
//! the file does not list are left alone, never deleted: retire one with
//! `"listed": false`. A SKU's fulfilment and currency are fixed once created
//! (servers and usage carry them): a file that changes them is refused, naming
//! the SKU. Running it twice changes nothing the second time.
//!
//! [`Mode::Missing`] (the dev seed, `seed.skus`): inserts what is missing and
//! changes nothing that exists, so staff edits on a dev stack survive its
//! restarts.

use hub_domain::{
    catalog::{Fulfilment, Sku},
    Currency, MinorUnits,
};
pub use service_kit::catalog::{Counts, Mode};
use sqlx::PgPool;

/// `RETURNING (xmax = 0)`: true for an insert, false for an update, no row
/// when the WHERE found nothing to change.
/// Apply `skus` (already validated: [`hub_domain::catalog::Catalog::parse`]).
pub async fn apply(pool: &PgPool, skus: &[Sku], mode: Mode) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    let mut tx = pool.begin().await?;
    // One applier at a time (two migration Jobs, a Job and a dev seed).
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('server_product.catalog'))")
        .execute(&mut *tx)
        .await?;
    for s in skus {
        if mode == Mode::Declared {
            let fixed = sqlx::query!(
                r#"SELECT fulfilment AS "fulfilment: Fulfilment", currency AS "currency: Currency"
                     FROM skus WHERE id = $1 FOR UPDATE"#,
                &s.id,
            )
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(f) = fixed {
                for (field, stored, declared) in [
                    ("fulfilment", f.fulfilment.as_str(), s.fulfilment.as_str()),
                    ("currency", f.currency.as_str(), s.currency.as_str()),
                ] {
                    anyhow::ensure!(
                        stored == declared,
                        "sku {:?}: {field} is {stored} and cannot become {declared}: a SKU's \
                         fulfilment and currency are fixed once created (declare a new SKU and \
                         retire this one with \"listed\": false)",
                        s.id
                    );
                }
            }
        }
        // Declared: insert, or update the declared fields only if one differs
        // (Some(true) inserted, Some(false) updated, None unchanged). Missing
        // (the dev seed): insert only.
        let outcome: Option<bool> = match mode {
            Mode::Declared => sqlx::query_scalar!(
                r#"INSERT INTO skus (id, name, fulfilment, sla_hours, badges, monthly_price_minor,
                                    currency, position, listed)
                   VALUES ($1, $2, $3, $4, COALESCE($5, '{}'::text[]), $6, $7, COALESCE($8, 0), COALESCE($9, true))
                   ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, sla_hours = EXCLUDED.sla_hours,
                     badges = COALESCE($5, skus.badges), monthly_price_minor = EXCLUDED.monthly_price_minor,
                     position = COALESCE($8, skus.position), listed = COALESCE($9, skus.listed)
                   WHERE (skus.name, skus.sla_hours, skus.badges, skus.monthly_price_minor, skus.position, skus.listed)
                     IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.sla_hours, COALESCE($5, skus.badges),
                       EXCLUDED.monthly_price_minor, COALESCE($8, skus.position), COALESCE($9, skus.listed))
                   RETURNING (xmax = 0) AS "inserted!""#,
                &s.id,
                s.name.trim(),
                s.fulfilment as Fulfilment,
                s.sla_hours,
                s.badges.as_deref(),
                s.monthly_price_minor as MinorUnits,
                s.currency as hub_domain::Currency,
                s.position,
                s.listed,
            )
            .fetch_optional(&mut *tx)
            .await?,
            Mode::Missing => sqlx::query_scalar!(
                r#"INSERT INTO skus (id, name, fulfilment, sla_hours, badges, monthly_price_minor,
                                    currency, position, listed)
                   VALUES ($1, $2, $3, $4, COALESCE($5, '{}'::text[]), $6, $7, COALESCE($8, 0), COALESCE($9, true))
                   ON CONFLICT (id) DO NOTHING RETURNING (xmax = 0) AS "inserted!""#,
                &s.id,
                s.name.trim(),
                s.fulfilment as Fulfilment,
                s.sla_hours,
                s.badges.as_deref(),
                s.monthly_price_minor as MinorUnits,
                s.currency as hub_domain::Currency,
                s.position,
                s.listed,
            )
            .fetch_optional(&mut *tx)
            .await?,
        };
        counts.add(outcome);
    }
    tx.commit().await?;
    Ok(counts)
}

/// Apply the declared catalog of `catalog.file` (the `migrate` subcommand)
/// and log what it did in one line.
pub async fn apply_declared(
    pool: &PgPool,
    catalog: &hub_domain::catalog::Catalog,
) -> anyhow::Result<Counts> {
    let c = apply(pool, &catalog.skus, Mode::Declared).await?;
    tracing::info!(
        created = c.created,
        updated = c.updated,
        unchanged = c.unchanged,
        "catalog applied: skus"
    );
    Ok(c)
}
