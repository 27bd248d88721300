//! The distributor part of the declared catalog ([`hub_domain::catalog`]),
//! applied in one transaction: all of it, or nothing.
//!
//! [`Mode::Declared`] (`catalog.file`, the `migrate` subcommand): the file is
//! authoritative for what it lists. An entity is inserted, or its declared
//! fields updated (absent optional fields keep their value); each covered
//! country is routed to it. Entities and coverage the file does not list are
//! left alone, never deleted. Running it twice changes nothing the second time.
//!
//! [`Mode::Missing`] (the dev seed, `seed.distributors`): inserts what is
//! missing and changes nothing that exists, so a dev stack's edits survive
//! its restarts.

use hub_domain::catalog::Distributor;
pub use service_kit::catalog::{Counts, Mode};
use sqlx::PgPool;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    pub distributors: Counts,
    pub coverage: Counts,
}

/// Apply `distributors` (already validated: [`hub_domain::catalog::Catalog::parse`]).
pub async fn apply(
    pool: &PgPool,
    distributors: &[Distributor],
    mode: Mode,
) -> anyhow::Result<Applied> {
    let mut applied = Applied::default();
    let mut tx = pool.begin().await?;
    // One applier at a time (two migration Jobs, a Job and a dev seed).
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('org_billing.catalog'))")
        .execute(&mut *tx)
        .await?;
    // Each statement answers `RETURNING (xmax = 0)`: true for an insert, false
    // for an update, and no row where nothing changed. Declared: insert, or
    // update the declared fields only if one differs. Missing (the dev seed):
    // insert only. One distributor's arguments, for either statement:
    macro_rules! upsert {
        ($d:ident, $tx:ident, $sql:literal) => {
            sqlx::query_scalar!(
                $sql,
                $d.id,
                $d.name.trim(),
                $d.country.as_str(),
                $d.legal_name.trim(),
                $d.currency as hub_domain::Currency,
                $d.tax_id.as_deref(),
                $d.address.as_deref(),
                $d.bank_name.as_deref(),
                $d.bank_iban.as_deref(),
                $d.bank_swift.as_deref(),
                $d.contact_phone.as_deref(),
                $d.contact_email.as_deref(),
                $d.notes.as_deref(),
                $d.profit_pct,
            )
            .fetch_optional(&mut *$tx)
            .await?
        };
    }
    for d in distributors {
        let outcome: Option<bool> = match mode {
            Mode::Declared => upsert!(
                d,
                tx,
                r#"INSERT INTO distributors (id, name, country, legal_name, currency, tax_id,
                       address, bank_name, bank_iban, bank_swift, contact_phone, contact_email, notes, profit_pct)
                   VALUES ($1, $2, $3, $4, $5, COALESCE($6, ''), COALESCE($7, ''), COALESCE($8, ''),
                       COALESCE($9, ''), COALESCE($10, ''), COALESCE($11, ''), COALESCE($12, ''), COALESCE($13, ''),
                       COALESCE($14::float8::numeric(5, 2), 0))
                   ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, country = EXCLUDED.country,
                       legal_name = EXCLUDED.legal_name, currency = EXCLUDED.currency,
                       tax_id = COALESCE($6, distributors.tax_id), address = COALESCE($7, distributors.address),
                       bank_name = COALESCE($8, distributors.bank_name), bank_iban = COALESCE($9, distributors.bank_iban),
                       bank_swift = COALESCE($10, distributors.bank_swift),
                       contact_phone = COALESCE($11, distributors.contact_phone),
                       contact_email = COALESCE($12, distributors.contact_email),
                       notes = COALESCE($13, distributors.notes),
                       profit_pct = COALESCE($14::float8::numeric(5, 2), distributors.profit_pct)
                   WHERE (distributors.name, distributors.country, distributors.legal_name, distributors.currency,
                          distributors.tax_id, distributors.address, distributors.bank_name, distributors.bank_iban,
                          distributors.bank_swift, distributors.contact_phone, distributors.contact_email,
                          distributors.notes, distributors.profit_pct)
                     IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.country, EXCLUDED.legal_name, EXCLUDED.currency,
                          COALESCE($6, distributors.tax_id), COALESCE($7, distributors.address),
                          COALESCE($8, distributors.bank_name), COALESCE($9, distributors.bank_iban),
                          COALESCE($10, distributors.bank_swift), COALESCE($11, distributors.contact_phone),
                          COALESCE($12, distributors.contact_email), COALESCE($13, distributors.notes),
                          COALESCE($14::float8::numeric(5, 2), distributors.profit_pct))
                   RETURNING (xmax = 0) AS "inserted!""#
            ),
            Mode::Missing => upsert!(
                d,
                tx,
                r#"INSERT INTO distributors (id, name, country, legal_name, currency, tax_id,
                       address, bank_name, bank_iban, bank_swift, contact_phone, contact_email, notes, profit_pct)
                   VALUES ($1, $2, $3, $4, $5, COALESCE($6, ''), COALESCE($7, ''), COALESCE($8, ''),
                       COALESCE($9, ''), COALESCE($10, ''), COALESCE($11, ''), COALESCE($12, ''), COALESCE($13, ''),
                       COALESCE($14::float8::numeric(5, 2), 0))
                   ON CONFLICT (id) DO NOTHING RETURNING (xmax = 0) AS "inserted!""#
            ),
        };
        applied.distributors.add(outcome);
        for country in &d.covers {
            let outcome: Option<bool> = match mode {
                Mode::Declared => sqlx::query_scalar!(
                    r#"INSERT INTO distributor_coverage (country, distributor_id) VALUES ($1, $2)
                       ON CONFLICT (country) DO UPDATE SET distributor_id = EXCLUDED.distributor_id
                       WHERE distributor_coverage.distributor_id IS DISTINCT FROM EXCLUDED.distributor_id
                       RETURNING (xmax = 0) AS "inserted!""#,
                    country.as_str(),
                    d.id,
                )
                .fetch_optional(&mut *tx)
                .await?,
                Mode::Missing => sqlx::query_scalar!(
                    r#"INSERT INTO distributor_coverage (country, distributor_id) VALUES ($1, $2)
                       ON CONFLICT (country) DO NOTHING RETURNING (xmax = 0) AS "inserted!""#,
                    country.as_str(),
                    d.id,
                )
                .fetch_optional(&mut *tx)
                .await?,
            };
            applied.coverage.add(outcome);
        }
    }
    tx.commit().await?;
    Ok(applied)
}

/// Apply the declared catalog of `catalog.file` (the `migrate` subcommand)
/// and log what it did in one line.
pub async fn apply_declared(
    pool: &PgPool,
    catalog: &hub_domain::catalog::Catalog,
) -> anyhow::Result<Applied> {
    let a = apply(pool, &catalog.distributors, Mode::Declared).await?;
    tracing::info!(
        created = a.distributors.created,
        updated = a.distributors.updated,
        unchanged = a.distributors.unchanged,
        coverage_created = a.coverage.created,
        coverage_updated = a.coverage.updated,
        coverage_unchanged = a.coverage.unchanged,
        "catalog applied: distributors"
    );
    Ok(a)
}
