//! The dev/test seed: a domestic entity for Turkey and one EU entity (VAT OSS)
//! covering all 27 member states. Idempotent (fixed ids).

use sqlx::PgPool;
use uuid::Uuid;

pub const TR_ENTITY: Uuid = Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0001);
pub const EU_ENTITY: Uuid = Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0002);

pub const EU_MEMBER_STATES: [&str; 27] = [
    "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV",
    "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
];

pub async fn distributors(pool: &PgPool) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    for (id, name, country, legal, currency) in [
        (TR_ENTITY, "Hub Türkiye", "TR", "Hub Teknoloji A.Ş.", "TRY"),
        (
            EU_ENTITY,
            "Hub Europe (VAT OSS)",
            "IE",
            "Hub Europe Ltd.",
            "EUR",
        ),
    ] {
        sqlx::query(
            "INSERT INTO distributors (id, name, country, legal_name, currency) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(country)
        .bind(legal)
        .bind(currency)
        .execute(&mut *tx)
        .await?;
    }
    let mut coverage = vec![("TR", TR_ENTITY)];
    coverage.extend(EU_MEMBER_STATES.iter().map(|c| (*c, EU_ENTITY)));
    for (country, id) in coverage {
        sqlx::query(
            "INSERT INTO distributor_coverage (country, distributor_id) VALUES ($1, $2) \
             ON CONFLICT (country) DO NOTHING",
        )
        .bind(country)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
