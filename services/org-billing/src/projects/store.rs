//! Projects' storage: the `projects` table, read and written here only.

use super::model::Project;
use hub_domain::{OrgId, ProjectId};
use service_kit::page::After;
use sqlx::{PgConnection, PgPool};

/// An organization's projects, newest first, after the cursor.
pub async fn of_org(
    pool: &PgPool,
    org: OrgId,
    after: Option<After>,
    limit: i64,
) -> sqlx::Result<Vec<Project>> {
    let (at, id) = after.unzip();
    sqlx::query_as!(
        Project,
        r#"SELECT id AS "id: ProjectId", org_id AS "org_id: OrgId", name, description, created_at
             FROM projects
            WHERE org_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
            ORDER BY created_at DESC, id DESC LIMIT $4"#,
        org as OrgId,
        at,
        id,
        limit,
    )
    .fetch_all(pool)
    .await
}

pub async fn one(pool: &PgPool, id: ProjectId) -> sqlx::Result<Option<Project>> {
    sqlx::query_as!(
        Project,
        r#"SELECT id AS "id: ProjectId", org_id AS "org_id: OrgId", name, description, created_at
             FROM projects WHERE id = $1"#,
        id as ProjectId,
    )
    .fetch_optional(pool)
    .await
}

/// The organization's project count, holding until the transaction ends the
/// lock that admits one creation at a time per organization (so the cap
/// holds under concurrent requests).
pub async fn count_locked(conn: &mut PgConnection, org: OrgId) -> sqlx::Result<i64> {
    crate::orgs::store::lock_capped(&mut *conn, org, crate::orgs::store::Capped::Projects).await?;
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM projects WHERE org_id = $1"#,
        org as OrgId,
    )
    .fetch_one(conn)
    .await
}

pub async fn insert(
    conn: &mut PgConnection,
    id: ProjectId,
    org: OrgId,
    name: &str,
    description: &str,
) -> sqlx::Result<Project> {
    sqlx::query_as!(
        Project,
        r#"INSERT INTO projects (id, org_id, name, description) VALUES ($1, $2, $3, $4)
           RETURNING id AS "id: ProjectId", org_id AS "org_id: OrgId", name, description, created_at"#,
        id as ProjectId,
        org as OrgId,
        name,
        description,
    )
    .fetch_one(conn)
    .await
}

/// Set the given fields; None when the project is gone.
pub async fn update(
    conn: &mut PgConnection,
    id: ProjectId,
    name: Option<&str>,
    description: Option<&str>,
) -> sqlx::Result<Option<Project>> {
    sqlx::query_as!(
        Project,
        r#"UPDATE projects SET name = COALESCE($2, name),
                  description = COALESCE($3, description), updated_at = now()
            WHERE id = $1
        RETURNING id AS "id: ProjectId", org_id AS "org_id: OrgId", name, description, created_at"#,
        id as ProjectId,
        name,
        description,
    )
    .fetch_optional(conn)
    .await
}

/// Remove the project; what it was, or None when it was already gone.
pub async fn delete(conn: &mut PgConnection, id: ProjectId) -> sqlx::Result<Option<Project>> {
    sqlx::query_as!(
        Project,
        r#"DELETE FROM projects WHERE id = $1
        RETURNING id AS "id: ProjectId", org_id AS "org_id: OrgId", name, description, created_at"#,
        id as ProjectId,
    )
    .fetch_optional(conn)
    .await
}
