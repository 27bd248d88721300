//! Organizations' storage: the rows of `organizations` with their distributor,
//! wallet, token balance and first member, read and written here only. The
//! functions take a connection (or a transaction): the handler decides the
//! transaction's bounds.

use super::model::{Organization, WithStatus};
use event_contracts::views::FoundOrganization;
use hub_domain::{
    CountryCode, Currency, DistributorId, KycStatus, LegalType, MinorUnits, OrgId, OrgStatus,
    UserId,
};
use service_kit::{ApiError, ApiResult};
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

// The Organization columns are written out in each query (`o` organizations,
// `d` its distributor): `o.id AS "id: OrgId", o.name,
// o.legal_type AS "legal_type: LegalType", o.country::text AS "country!",
// o.distributor_id AS "distributor_entity_id: DistributorId", d.name AS distributor_entity,
// o.kyc_status AS "kyc_status: KycStatus", o.kyc_tier`. The text-backed enums
// decode straight into the domain types (a value outside one is an error).

/// 404 unless the organization exists (its wallet and token balance exist with it).
pub async fn require(conn: &mut PgConnection, org_id: OrgId) -> ApiResult<()> {
    let found: Option<i32> = sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM organizations WHERE id = $1"#,
        org_id as OrgId
    )
    .fetch_optional(conn)
    .await?;
    found.map(|_| ()).ok_or(ApiError::NotFound)
}

/// For a member's write into `org_id`, in its transaction: 404 unless the
/// organization exists, 403 naming the suspension while it is suspended.
/// The row stays share-locked until the transaction ends, so a suspension
/// (which updates the row) waits for the writes that passed and every later
/// write reads it: none commits after staff heard the suspension's 200, even
/// while the caller's forwarded identity still says active.
pub async fn lock_writable(conn: &mut PgConnection, org_id: OrgId) -> ApiResult<()> {
    let status = sqlx::query_scalar!(
        r#"SELECT status AS "status: OrgStatus" FROM organizations WHERE id = $1 FOR SHARE"#,
        org_id as OrgId
    )
    .fetch_optional(conn)
    .await?
    .ok_or(ApiError::NotFound)?;
    match status.write_refusal() {
        Some(refusal) => Err(ApiError::forbidden(refusal)),
        None => Ok(()),
    }
}

/// Hold, until the transaction ends, the lock that admits one creation at a
/// time per user (so that the daily quota holds under concurrent requests).
pub async fn lock_creations_of(conn: &mut PgConnection, user: UserId) -> sqlx::Result<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 3))",
        user.to_string(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// An organization's collection whose size a creation checks against a cap
/// (each has its own lock: the value is the lock key's seed).
#[derive(Debug, Clone, Copy)]
pub enum Capped {
    Projects = 5,
    Assets = 6,
}

/// Hold, until the transaction ends, the lock that admits one creation at a
/// time into `what` of `org`, so that its cap holds under concurrent requests.
pub async fn lock_capped(conn: &mut PgConnection, org: OrgId, what: Capped) -> sqlx::Result<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, $2))",
        org.to_string(),
        what as i64,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Organizations `user` created in the last 24 hours.
pub async fn created_today(conn: &mut PgConnection, user: UserId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM organizations WHERE created_by = $1 AND created_at > now() - interval '1 day'"#,
        user as UserId,
    )
    .fetch_one(conn)
    .await
}

/// The distributor entity covering `country`, and its currency.
pub async fn route(
    conn: &mut PgConnection,
    country: CountryCode,
) -> sqlx::Result<Option<(DistributorId, Currency)>> {
    Ok(sqlx::query!(
        r#"SELECT d.id AS "id: DistributorId", d.currency AS "currency: Currency"
             FROM distributor_coverage c JOIN distributors d ON d.id = c.distributor_id
            WHERE c.country = $1"#,
        country.as_str(),
    )
    .fetch_optional(conn)
    .await?
    .map(|r| (r.id, r.currency)))
}

/// A new organization.
pub struct NewOrg<'a> {
    pub id: OrgId,
    pub name: &'a str,
    pub legal_type: LegalType,
    pub country: CountryCode,
    pub distributor_id: DistributorId,
    pub currency: Currency,
    pub creator: UserId,
}

/// The organization, its wallet (in its distributor's currency), its token
/// balance and its creator as first owner (the replica identity confirms).
pub async fn insert(conn: &mut PgConnection, o: &NewOrg<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO organizations (id, name, legal_type, country, distributor_id, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        o.id as OrgId,
        o.name,
        o.legal_type as LegalType,
        o.country.as_str(),
        o.distributor_id as DistributorId,
        o.creator as UserId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO wallets (org_id, currency) VALUES ($1, $2)",
        o.id as OrgId,
        o.currency as Currency,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO token_balances (org_id) VALUES ($1)",
        o.id as OrgId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO org_members (org_id, user_id, role, changed_at) VALUES ($1, $2, 'owner', now())",
        o.id as OrgId,
        o.creator as UserId,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// One organization (it must exist).
pub async fn one(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<Organization> {
    sqlx::query_as!(
        Organization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type AS "legal_type: LegalType",
                  o.country::text AS "country!",
                  o.distributor_id AS "distributor_entity_id: DistributorId", d.name AS distributor_entity,
                  o.kyc_status AS "kyc_status: KycStatus", o.kyc_tier
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
            WHERE o.id = $1"#,
        org_id as OrgId,
    )
    .fetch_one(conn)
    .await
}

/// The organizations `user` belongs to, by the membership replica, oldest first.
pub async fn of_member(pool: &PgPool, user: UserId) -> sqlx::Result<Vec<Organization>> {
    sqlx::query_as!(
        Organization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type AS "legal_type: LegalType",
                  o.country::text AS "country!",
                  o.distributor_id AS "distributor_entity_id: DistributorId", d.name AS distributor_entity,
                  o.kyc_status AS "kyc_status: KycStatus", o.kyc_tier
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
            WHERE o.id IN (SELECT org_id FROM org_members WHERE user_id = $1)
            ORDER BY o.created_at, o.id"#,
        user as UserId,
    )
    .fetch_all(pool)
    .await
}

/// The organizations of `ids` that exist, oldest first.
pub async fn by_ids(pool: &PgPool, ids: &[OrgId]) -> sqlx::Result<Vec<Organization>> {
    sqlx::query_as!(
        Organization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type AS "legal_type: LegalType",
                  o.country::text AS "country!",
                  o.distributor_id AS "distributor_entity_id: DistributorId", d.name AS distributor_entity,
                  o.kyc_status AS "kyc_status: KycStatus", o.kyc_tier
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
            WHERE o.id = ANY($1) ORDER BY o.created_at, o.id"#,
        ids as &[OrgId],
    )
    .fetch_all(pool)
    .await
}

/// What the detail shows, before the caller's role decides which of it.
pub struct DetailRow {
    pub id: OrgId,
    pub name: String,
    pub legal_type: LegalType,
    pub country: String,
    pub distributor_entity_id: DistributorId,
    pub distributor_entity: String,
    pub kyc_status: KycStatus,
    pub kyc_tier: i32,
    pub status: OrgStatus,
    pub members: i64,
    pub assets: i64,
    pub wallet_currency: Currency,
    pub wallet_balance_minor: MinorUnits,
    pub tokens: i64,
    /// Sealed (crate::kyc); NULL until verified.
    pub legal_identity: Option<Vec<u8>>,
    pub kyc_locked: bool,
    pub kyc_verified_at: Option<OffsetDateTime>,
    /// Why staff suspended it (staff see it).
    pub status_reason: Option<String>,
    pub status_changed_at: Option<OffsetDateTime>,
}

pub async fn detail(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Option<DetailRow>> {
    sqlx::query_as!(
        DetailRow,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type AS "legal_type: LegalType",
                  o.country::text AS "country!",
                  o.distributor_id AS "distributor_entity_id: DistributorId", d.name AS distributor_entity,
                  o.kyc_status AS "kyc_status: KycStatus", o.kyc_tier,
                  o.status AS "status: OrgStatus", o.legal_identity, o.kyc_locked, o.kyc_verified_at,
                  o.status_reason, o.status_changed_at,
                  w.currency AS "wallet_currency: Currency",
                  w.balance_minor AS "wallet_balance_minor: MinorUnits",
                  t.balance AS tokens,
                  (SELECT count(*) FROM org_members m WHERE m.org_id = o.id) AS "members!",
                  (SELECT count(*) FROM org_assets a WHERE a.org_id = o.id) AS "assets!"
             FROM organizations o JOIN distributors d ON d.id = o.distributor_id
             JOIN wallets w ON w.org_id = o.id
             JOIN token_balances t ON t.org_id = o.id WHERE o.id = $1"#,
        org_id as OrgId,
    )
    .fetch_optional(pool)
    .await
}

/// Move the organization to `to` (with `reason` when suspending or closing)
/// unless it is there already or closed (closing is final): the new status
/// version, or None (no change, or no such organization).
pub async fn set_status(
    conn: &mut PgConnection,
    org_id: OrgId,
    to: OrgStatus,
    reason: Option<&str>,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "UPDATE organizations SET status = $2, status_reason = $3, status_changed_at = now(),
                status_version = status_version + 1
          WHERE id = $1 AND status <> $2 AND status <> 'closed' RETURNING status_version",
        org_id as OrgId,
        to as OrgStatus,
        reason,
    )
    .fetch_optional(conn)
    .await
}

/// The organization with its status (it must exist).
pub async fn with_status(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<WithStatus> {
    let r = sqlx::query!(
        r#"SELECT status AS "status: OrgStatus", status_reason, status_changed_at
             FROM organizations WHERE id = $1"#,
        org_id as OrgId,
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(WithStatus {
        org: one(conn, org_id).await?,
        status: r.status,
        status_reason: r.status_reason,
        status_changed_at: r.status_changed_at,
    })
}

/// Name, legal type and country (kyc's form depends on them).
pub struct Profile {
    pub name: String,
    pub legal_type: LegalType,
    pub country: String,
}

pub async fn profile(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Option<Profile>> {
    sqlx::query_as!(
        Profile,
        r#"SELECT name, legal_type AS "legal_type: LegalType", country::text AS "country!"
             FROM organizations WHERE id = $1"#,
        org_id as OrgId,
    )
    .fetch_optional(pool)
    .await
}

/// The organization with id `id` (with its wallet's currency), if any.
pub async fn find_by_id(pool: &PgPool, id: OrgId) -> sqlx::Result<Vec<FoundOrganization>> {
    sqlx::query_as!(
        FoundOrganization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type AS "legal_type: LegalType",
                  o.country::text AS "country!",
                  o.kyc_status AS "kyc_status: KycStatus",
                  w.currency AS "wallet_currency?: Currency"
             FROM organizations o LEFT JOIN wallets w ON w.org_id = o.id
            WHERE o.id = $1"#,
        id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// Up to 10 organizations whose lower-cased name matches `pattern` (a LIKE
/// pattern), exact matches of `exact` first.
pub async fn find_by_name(
    pool: &PgPool,
    pattern: &str,
    exact: &str,
) -> sqlx::Result<Vec<FoundOrganization>> {
    sqlx::query_as!(
        FoundOrganization,
        r#"SELECT o.id AS "id: OrgId", o.name, o.legal_type AS "legal_type: LegalType",
                  o.country::text AS "country!",
                  o.kyc_status AS "kyc_status: KycStatus",
                  w.currency AS "wallet_currency?: Currency"
             FROM organizations o LEFT JOIN wallets w ON w.org_id = o.id
            WHERE lower(o.name) LIKE $1
            ORDER BY (lower(o.name) = $2) DESC, o.name, o.id LIMIT 10"#,
        pattern,
        exact,
    )
    .fetch_all(pool)
    .await
}
