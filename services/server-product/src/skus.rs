//! server-product's storage of the catalog's SKUs (`skus`) for the routes:
//! the public list, staff's list, create and change, and the lookups ordering
//! and resizing make, checked at compile time. SKUs come back as domain
//! values: the price in [`MinorUnits`], the currency a [`Currency`].

use hub_domain::{catalog::Sku as Declared, Currency, MinorUnits};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

pub use hub_domain::catalog::Fulfilment;

/// What a SKU step may refuse, apart from database errors.
#[derive(Debug)]
pub enum Error {
    /// A SKU with this id exists already.
    Exists(String),
    /// No SKU has this id.
    NotFound,
    Db(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e)
    }
}

/// A listed SKU as the public catalog shows it.
#[derive(Serialize)]
pub struct Sku {
    pub id: String,
    pub name: String,
    pub fulfilment: Fulfilment,
    pub sla_hours: Option<i32>,
    pub badges: Vec<String>,
    pub monthly_price_minor: MinorUnits,
    pub currency: Currency,
}

/// A SKU as staff see it: with its position and whether it is listed.
#[derive(Serialize)]
pub struct AdminSku {
    pub id: String,
    pub name: String,
    pub fulfilment: Fulfilment,
    pub sla_hours: Option<i32>,
    pub badges: Vec<String>,
    pub monthly_price_minor: MinorUnits,
    pub currency: Currency,
    pub position: i32,
    pub listed: bool,
}

/// Listed SKUs in catalog order.
pub async fn listed(pool: &PgPool) -> sqlx::Result<Vec<Sku>> {
    sqlx::query_as!(
        Sku,
        r#"SELECT id, name, fulfilment AS "fulfilment: Fulfilment", sla_hours, badges, monthly_price_minor AS "monthly_price_minor: MinorUnits", currency AS "currency: Currency"
           FROM skus WHERE listed ORDER BY position, id"#,
    )
    .fetch_all(pool)
    .await
}

/// Every SKU, retired ones too, in catalog order (at most 5000).
pub async fn all(pool: &PgPool) -> sqlx::Result<Vec<AdminSku>> {
    sqlx::query_as!(
        AdminSku,
        r#"SELECT id, name, fulfilment AS "fulfilment: Fulfilment", sla_hours, badges, monthly_price_minor AS "monthly_price_minor: MinorUnits", currency AS "currency: Currency", position, listed
           FROM skus ORDER BY position, id LIMIT 5000"#,
    )
    .fetch_all(pool)
    .await
}

/// Insert `s` (validated); [`Error::Exists`] when its id is taken.
pub async fn create(conn: &mut PgConnection, s: &Declared) -> Result<AdminSku, Error> {
    sqlx::query_as!(
        AdminSku,
        r#"INSERT INTO skus (id, name, fulfilment, sla_hours, badges, monthly_price_minor, currency, position, listed)
           VALUES ($1, $2, $3, $4, COALESCE($5, '{}'::text[]), $6, $7, COALESCE($8, 0), COALESCE($9, true))
           ON CONFLICT (id) DO NOTHING RETURNING id, name, fulfilment AS "fulfilment: Fulfilment", sla_hours, badges, monthly_price_minor AS "monthly_price_minor: MinorUnits", currency AS "currency: Currency", position, listed"#,
        &s.id,
        s.name.trim(),
        s.fulfilment as Fulfilment,
        s.sla_hours,
        s.badges.as_deref(),
        s.monthly_price_minor as MinorUnits,
        s.currency as Currency,
        s.position,
        s.listed,
    )
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| Error::Exists(s.id.clone()))
}

/// SKU `id`, locked until the transaction ends.
pub async fn lock(conn: &mut PgConnection, id: &str) -> Result<AdminSku, Error> {
    sqlx::query_as!(
        AdminSku,
        r#"SELECT id, name, fulfilment AS "fulfilment: Fulfilment", sla_hours, badges, monthly_price_minor AS "monthly_price_minor: MinorUnits", currency AS "currency: Currency", position, listed
           FROM skus WHERE id = $1 FOR UPDATE"#,
        id,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(Error::NotFound)
}

/// A change of a SKU: `None` leaves a field as it is; the SLA is always set.
pub struct Change<'a> {
    pub name: Option<&'a str>,
    pub monthly_price_minor: Option<MinorUnits>,
    pub sla_hours: Option<i32>,
    pub badges: Option<&'a [String]>,
    pub position: Option<i32>,
    pub listed: Option<bool>,
}

/// Apply `c` to SKU `id` (locked: [`lock`]); returns it after the change.
pub async fn update(conn: &mut PgConnection, id: &str, c: Change<'_>) -> sqlx::Result<AdminSku> {
    sqlx::query_as!(
        AdminSku,
        r#"UPDATE skus SET name = COALESCE($2, name), monthly_price_minor = COALESCE($3, monthly_price_minor),
           sla_hours = $4, badges = COALESCE($5, badges), position = COALESCE($6, position),
           listed = COALESCE($7, listed)
           WHERE id = $1 RETURNING id, name, fulfilment AS "fulfilment: Fulfilment", sla_hours, badges, monthly_price_minor AS "monthly_price_minor: MinorUnits", currency AS "currency: Currency", position, listed"#,
        id,
        c.name,
        c.monthly_price_minor as Option<MinorUnits>,
        c.sla_hours,
        c.badges,
        c.position,
        c.listed,
    )
    .fetch_one(conn)
    .await
}

/// How a listed SKU is fulfilled, and its SLA (for ordering).
pub struct Orderable {
    pub fulfilment: Fulfilment,
    pub sla_hours: Option<i32>,
    pub monthly_price_minor: MinorUnits,
}

/// Listed SKU `id`'s fulfilment, SLA and price; `None` when it is not listed.
pub async fn orderable(pool: &PgPool, id: &str) -> sqlx::Result<Option<Orderable>> {
    sqlx::query_as!(
        Orderable,
        r#"SELECT fulfilment AS "fulfilment: Fulfilment", sla_hours,
                  monthly_price_minor AS "monthly_price_minor: MinorUnits"
             FROM skus WHERE id = $1 AND listed"#,
        id,
    )
    .fetch_optional(pool)
    .await
}

/// Listed SKU `id`'s fulfilment; `None` when it is not listed (resizing).
pub async fn listed_fulfilment(pool: &PgPool, id: &str) -> sqlx::Result<Option<Fulfilment>> {
    sqlx::query_scalar!(
        r#"SELECT fulfilment AS "fulfilment: Fulfilment" FROM skus WHERE id = $1 AND listed"#,
        id,
    )
    .fetch_optional(pool)
    .await
}

#[cfg(test)]
mod tests {
    use super::Fulfilment;

    #[test]
    fn fulfilments_read_back_and_serialize_as_stored() {
        for &f in Fulfilment::ALL {
            assert_eq!(Fulfilment::parse(f.as_str()), Some(f));
            assert_eq!(
                serde_json::to_value(f).expect("serialize"),
                serde_json::Value::from(f.as_str())
            );
        }
        assert_eq!(Fulfilment::parse("API"), None);
        assert_eq!(Fulfilment::parse(""), None);
    }
}
