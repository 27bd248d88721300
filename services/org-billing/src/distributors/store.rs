//! Distributor entities' storage: `distributors`, the countries routed to
//! them (`distributor_coverage`), their observers (`distributor_staff`), the
//! organizations routed to them and their paid invoices. The functions take a
//! connection (or a transaction): the handler decides the transaction's bounds.

use super::model::{Distributor, OrgRow, StaffMember, StaffRole};
use hub_domain::{Currency, DistributorId, KycStatus, LegalType, MinorUnits, OrgId, UserId};
use service_kit::{ApiError, ApiResult, OnConstraint};
use sqlx::PgConnection;
use time::Date;

/// The entities `id` names (every one when None) that `observer` observes
/// (no filter when None), oldest first, each with the countries routed to it.
pub async fn select(
    conn: &mut PgConnection,
    id: Option<DistributorId>,
    observer: Option<UserId>,
) -> sqlx::Result<Vec<Distributor>> {
    sqlx::query_as!(
        Distributor,
        r#"SELECT d.id AS "id: DistributorId", d.name, d.country::text AS "country!", d.legal_name, d.tax_id, d.address,
                  d.bank_name, d.bank_iban, d.bank_swift, d.contact_phone, d.contact_email, d.notes,
                  d.profit_pct::float8 AS "profit_pct!", d.currency AS "currency: Currency", d.created_at,
                  ARRAY(SELECT c.country::text FROM distributor_coverage c
                         WHERE c.distributor_id = d.id ORDER BY c.country) AS "covers!"
             FROM distributors d
            WHERE ($1::uuid IS NULL OR d.id = $1)
              AND ($2::uuid IS NULL OR d.id IN
                   (SELECT s.distributor_id FROM distributor_staff s WHERE s.user_id = $2))
            ORDER BY d.created_at, d.id"#,
        id as Option<DistributorId>,
        observer as Option<UserId>,
    )
    .fetch_all(conn)
    .await
}

/// One entity, if it exists.
pub async fn one(conn: &mut PgConnection, id: DistributorId) -> sqlx::Result<Option<Distributor>> {
    Ok(select(conn, Some(id), None).await?.into_iter().next())
}

/// Whether the entity exists, and whether `user` observes it.
pub async fn access(
    conn: &mut PgConnection,
    id: DistributorId,
    user: UserId,
) -> sqlx::Result<(bool, bool)> {
    let r = sqlx::query!(
        r#"SELECT EXISTS (SELECT 1 FROM distributors WHERE id = $1) AS "exists!",
                  EXISTS (SELECT 1 FROM distributor_staff WHERE distributor_id = $1 AND user_id = $2)
                      AS "observer!""#,
        id as DistributorId,
        user as UserId,
    )
    .fetch_one(conn)
    .await?;
    Ok((r.exists, r.observer))
}

/// A new entity's columns (validated).
pub struct NewDistributor<'a> {
    pub id: DistributorId,
    pub name: &'a str,
    pub country: &'a str,
    pub legal_name: &'a str,
    pub currency: Currency,
    pub tax_id: &'a str,
    pub address: &'a str,
    pub bank_name: &'a str,
    pub bank_iban: &'a str,
    pub bank_swift: &'a str,
    pub contact_phone: &'a str,
    pub contact_email: &'a str,
    pub notes: &'a str,
    /// profit_pct in hundredths (0 to 10000).
    pub profit_hundredths: i64,
}

pub async fn insert(conn: &mut PgConnection, d: &NewDistributor<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO distributors (id, name, country, legal_name, currency, tax_id, address, \
             bank_name, bank_iban, bank_swift, contact_phone, contact_email, notes, profit_pct) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::bigint::numeric / 100)",
        d.id as DistributorId,
        d.name,
        d.country,
        d.legal_name,
        d.currency as Currency,
        d.tax_id,
        d.address,
        d.bank_name,
        d.bank_iban,
        d.bank_swift,
        d.contact_phone,
        d.contact_email,
        d.notes,
        d.profit_hundredths,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Route `country` to the entity `id` unless some entity covers it already
/// (existing coverage is never moved here); whether it now does.
pub async fn cover_if_uncovered(
    conn: &mut PgConnection,
    country: &str,
    id: DistributorId,
) -> sqlx::Result<bool> {
    let inserted: Option<i32> = sqlx::query_scalar!(
        r#"INSERT INTO distributor_coverage (country, distributor_id) VALUES ($1, $2)
           ON CONFLICT (country) DO NOTHING RETURNING 1 AS "one!""#,
        country,
        id as DistributorId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(inserted.is_some())
}

/// The entity's fixed fields (country, currency), its row locked until the
/// transaction ends; 404 when it does not exist.
pub async fn lock(conn: &mut PgConnection, id: DistributorId) -> ApiResult<(String, Currency)> {
    let r = sqlx::query!(
        r#"SELECT country::text AS "country!", currency AS "currency: Currency"
             FROM distributors WHERE id = $1 FOR UPDATE"#,
        id as DistributorId,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(ApiError::NotFound)?;
    Ok((r.country, r.currency))
}

/// A partial change (None: unchanged), validated.
#[derive(Default)]
pub struct Change<'a> {
    pub name: Option<&'a str>,
    pub legal_name: Option<&'a str>,
    pub tax_id: Option<&'a str>,
    pub address: Option<&'a str>,
    pub bank_name: Option<&'a str>,
    pub bank_iban: Option<&'a str>,
    pub bank_swift: Option<&'a str>,
    pub contact_phone: Option<&'a str>,
    pub contact_email: Option<&'a str>,
    pub notes: Option<&'a str>,
    pub profit_hundredths: Option<i64>,
}

pub async fn update(
    conn: &mut PgConnection,
    id: DistributorId,
    c: &Change<'_>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE distributors SET name = COALESCE($2, name), legal_name = COALESCE($3, legal_name), \
             tax_id = COALESCE($4, tax_id), address = COALESCE($5, address), \
             bank_name = COALESCE($6, bank_name), bank_iban = COALESCE($7, bank_iban), \
             bank_swift = COALESCE($8, bank_swift), contact_phone = COALESCE($9, contact_phone), \
             contact_email = COALESCE($10, contact_email), notes = COALESCE($11, notes), \
             profit_pct = COALESCE($12::bigint::numeric / 100, profit_pct) \
         WHERE id = $1",
        id as DistributorId,
        c.name,
        c.legal_name,
        c.tax_id,
        c.address,
        c.bank_name,
        c.bank_iban,
        c.bank_swift,
        c.contact_phone,
        c.contact_email,
        c.notes,
        c.profit_hundredths,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The entity's observers, oldest first.
pub async fn staff_of(
    conn: &mut PgConnection,
    id: DistributorId,
) -> sqlx::Result<Vec<StaffMember>> {
    sqlx::query_as!(
        StaffMember,
        r#"SELECT user_id AS "user_id: UserId", email, role AS "role: StaffRole", since
             FROM distributor_staff WHERE distributor_id = $1 ORDER BY since, user_id"#,
        id as DistributorId,
    )
    .fetch_all(conn)
    .await
}

/// Make `user` a member of `id`'s staff; 409 when they are one already.
pub async fn add_staff(
    conn: &mut PgConnection,
    id: DistributorId,
    user: UserId,
    email: &str,
    role: StaffRole,
) -> ApiResult<StaffMember> {
    sqlx::query_as!(
        StaffMember,
        r#"INSERT INTO distributor_staff (distributor_id, user_id, email, role)
           VALUES ($1, $2, $3, $4)
           RETURNING user_id AS "user_id: UserId", email, role AS "role: StaffRole", since"#,
        id as DistributorId,
        user as UserId,
        email,
        role as StaffRole,
    )
    .fetch_one(conn)
    .await
    .on_constraint("distributor_staff_pkey", || {
        ApiError::conflict("this user is already on the distributor's staff")
    })
}

/// Remove `user` from the entity's staff; whether they were on it.
pub async fn remove_staff(
    conn: &mut PgConnection,
    id: DistributorId,
    user: UserId,
) -> sqlx::Result<bool> {
    let removed: Option<i32> = sqlx::query_scalar!(
        r#"DELETE FROM distributor_staff WHERE distributor_id = $1 AND user_id = $2
           RETURNING 1 AS "one!""#,
        id as DistributorId,
        user as UserId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(removed.is_some())
}

/// Up to `limit` organizations routed to the entity, newest first, after
/// `after` (the (created_at, id) of the last one of the previous page).
pub async fn organizations(
    conn: &mut PgConnection,
    id: DistributorId,
    after: Option<service_kit::page::After>,
    limit: i64,
) -> sqlx::Result<Vec<OrgRow>> {
    let (at, after_id) = after.unzip();
    sqlx::query_as!(
        OrgRow,
        r#"SELECT o.id AS "id: OrgId", o.name, o.country::text AS "country!",
                  o.legal_type AS "legal_type: LegalType", o.status,
                  o.kyc_status AS "kyc_status: KycStatus", o.created_at
             FROM organizations o
            WHERE o.distributor_id = $1
              AND ($2::timestamptz IS NULL OR (o.created_at, o.id) < ($2, $3::uuid))
            ORDER BY o.created_at DESC, o.id DESC
            LIMIT $4"#,
        id as DistributorId,
        at,
        after_id,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// One currency's paid invoices of a month.
pub struct Paid {
    pub currency: Currency,
    pub invoices: i64,
    pub total_minor: MinorUnits,
}

/// Per currency, the entity's invoices (kind `invoice`, not void) paid in
/// the month starting on `month` (UTC).
pub async fn paid_in_month(
    conn: &mut PgConnection,
    id: DistributorId,
    month: Date,
) -> sqlx::Result<Vec<Paid>> {
    sqlx::query_as!(
        Paid,
        r#"SELECT currency AS "currency: Currency", count(*) AS "invoices!",
                  sum(total_minor)::bigint AS "total_minor!: MinorUnits"
             FROM invoices
            WHERE distributor_id = $1 AND kind = 'invoice' AND voided_at IS NULL
              AND paid_at >= ($2::date)::timestamp AT TIME ZONE 'UTC'
              AND paid_at < (($2::date) + interval '1 month') AT TIME ZONE 'UTC'
            GROUP BY currency ORDER BY currency"#,
        id as DistributorId,
        month,
    )
    .fetch_all(conn)
    .await
}

/// The entity's profit_pct in hundredths (exact), if it exists.
pub async fn profit_hundredths(
    conn: &mut PgConnection,
    id: DistributorId,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        r#"SELECT (profit_pct * 100)::bigint AS "h!" FROM distributors WHERE id = $1"#,
        id as DistributorId,
    )
    .fetch_optional(conn)
    .await
}
