//! Assets' storage: the `org_assets` table, read and written here only.

use super::model::{Asset, Kind};
use hub_domain::{AssetId, OrgId};
use sqlx::{PgConnection, PgPool};

pub struct NewAsset {
    pub kind: Kind,
    pub name: String,
    pub url: String,
    pub note: String,
}

/// The fields a PATCH sets (None: unchanged).
pub struct AssetPatch {
    pub kind: Option<Kind>,
    pub name: Option<String>,
    pub url: Option<String>,
    pub note: Option<String>,
}

impl AssetPatch {
    /// The names of the fields set (values stay out of audit).
    pub fn fields(&self) -> Vec<&'static str> {
        [
            ("kind", self.kind.is_some()),
            ("name", self.name.is_some()),
            ("url", self.url.is_some()),
            ("note", self.note.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, set)| set.then_some(f))
        .collect()
    }
}

/// An organization's assets, oldest first.
pub async fn of_org(pool: &PgPool, org: OrgId) -> sqlx::Result<Vec<Asset>> {
    sqlx::query_as!(
        Asset,
        r#"SELECT id AS "id: AssetId", kind AS "kind: Kind", name, url, note FROM org_assets
            WHERE org_id = $1 ORDER BY created_at, id"#,
        org as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// The organization's asset `id`, if it is there.
pub async fn one(conn: &mut PgConnection, org: OrgId, id: AssetId) -> sqlx::Result<Option<Asset>> {
    sqlx::query_as!(
        Asset,
        r#"SELECT id AS "id: AssetId", kind AS "kind: Kind", name, url, note FROM org_assets
            WHERE org_id = $1 AND id = $2"#,
        org as OrgId,
        id as AssetId,
    )
    .fetch_optional(conn)
    .await
}

/// The organization's asset count, holding until the transaction ends the
/// lock that admits one creation at a time per organization.
pub async fn count_locked(conn: &mut PgConnection, org: OrgId) -> sqlx::Result<i64> {
    crate::orgs::store::lock_capped(&mut *conn, org, crate::orgs::store::Capped::Assets).await?;
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM org_assets WHERE org_id = $1"#,
        org as OrgId,
    )
    .fetch_one(conn)
    .await
}

pub async fn insert(
    conn: &mut PgConnection,
    id: AssetId,
    org: OrgId,
    a: &NewAsset,
) -> sqlx::Result<Asset> {
    sqlx::query_as!(
        Asset,
        r#"INSERT INTO org_assets (id, org_id, kind, name, url, note) VALUES ($1, $2, $3, $4, $5, $6)
           RETURNING id AS "id: AssetId", kind AS "kind: Kind", name, url, note"#,
        id as AssetId,
        org as OrgId,
        a.kind as Kind,
        a.name,
        a.url,
        a.note,
    )
    .fetch_one(conn)
    .await
}

/// Set the patch's fields on the organization's asset; None when there is
/// no such asset in this organization.
pub async fn update(
    conn: &mut PgConnection,
    org: OrgId,
    id: AssetId,
    p: &AssetPatch,
) -> sqlx::Result<Option<Asset>> {
    sqlx::query_as!(
        Asset,
        r#"UPDATE org_assets SET kind = COALESCE($3, kind), name = COALESCE($4, name),
                  url = COALESCE($5, url), note = COALESCE($6, note), updated_at = now()
            WHERE org_id = $1 AND id = $2
        RETURNING id AS "id: AssetId", kind AS "kind: Kind", name, url, note"#,
        org as OrgId,
        id as AssetId,
        p.kind as Option<Kind>,
        p.name,
        p.url,
        p.note,
    )
    .fetch_optional(conn)
    .await
}

/// Remove the organization's asset; what it was, or None.
pub async fn delete(
    conn: &mut PgConnection,
    org: OrgId,
    id: AssetId,
) -> sqlx::Result<Option<Asset>> {
    sqlx::query_as!(
        Asset,
        r#"DELETE FROM org_assets WHERE org_id = $1 AND id = $2
        RETURNING id AS "id: AssetId", kind AS "kind: Kind", name, url, note"#,
        org as OrgId,
        id as AssetId,
    )
    .fetch_optional(conn)
    .await
}
