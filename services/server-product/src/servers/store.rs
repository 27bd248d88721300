//! server-product's storage of servers and what hangs off them (`servers`,
//! `provision_jobs`, `usage_periods`, `events`), checked at compile time.
//! Functions take the caller's connection or transaction (the handler or the
//! worker decides the boundary) and answer sqlx's errors: the route maps the
//! one constraint a client can hit, [`super::HOSTNAME_PER_ORG`], through
//! `OnConstraint`. Rows come back typed (the status a [`Status`]).

use super::{Row, Status};
use hub_domain::{OrgId, UserId};
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

/// A server to insert.
pub struct NewServer<'a> {
    pub org_id: OrgId,
    pub sku_id: &'a str,
    pub hostname: &'a str,
    pub status: Status,
    pub fulfilment: &'a str,
    pub due_at: Option<OffsetDateTime>,
    pub created_by: UserId,
    pub at: OffsetDateTime,
}

/// Insert `s` under a new id; a live server of the organization with the same
/// hostname violates [`super::HOSTNAME_PER_ORG`].
pub async fn insert(conn: &mut PgConnection, s: NewServer<'_>) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"INSERT INTO servers (id, org_id, sku_id, hostname, status, fulfilment, due_at, created_by,
           created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        Uuid::now_v7(),
        s.org_id as OrgId,
        s.sku_id,
        s.hostname,
        s.status as Status,
        s.fulfilment,
        s.due_at,
        s.created_by as UserId,
        s.at,
    )
    .fetch_one(conn)
    .await
}

/// Server `id`, no lock.
pub async fn find(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref,
                  credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at
             FROM servers WHERE id = $1"#,
        id,
    )
    .fetch_optional(conn)
    .await
}

/// A page of `org_id`'s servers, newest first, strictly after `after`
/// (created_at, id) when given; `limit` rows at most.
pub async fn page_of_org(
    pool: &PgPool,
    org_id: OrgId,
    after: Option<(OffsetDateTime, Uuid)>,
    limit: i64,
) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE org_id = $1
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
           ORDER BY created_at DESC, id DESC LIMIT $4"#,
        org_id as OrgId,
        after.map(|a| a.0),
        after.map(|a| a.1),
        limit,
    )
    .fetch_all(pool)
    .await
}

/// `org_id`'s latest 1000 servers, newest first (the service contract's list).
pub async fn latest_of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1000"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// Every server of `org_id`, oldest first (the export).
pub async fn all_of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE org_id = $1 ORDER BY created_at, id"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// The manual fulfilment queue: the 500 pending servers due first.
pub async fn pending_fulfilment(pool: &PgPool) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE status = 'pending_fulfilment' ORDER BY due_at, id LIMIT 500"#,
    )
    .fetch_all(pool)
    .await
}

/// Move server `id` of `org_id` to `to` (`None`: its status unchanged) at
/// `at`, if its status is one of `from`: a conditional UPDATE, so of two
/// concurrent moves at most one finds the status it needs. Reaching active
/// stamps `activated_at` (the first time), reaching terminated
/// `terminated_at`. `None` when nothing moved.
pub async fn move_status(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: Uuid,
    from: &[Status],
    to: Option<Status>,
    at: OffsetDateTime,
) -> sqlx::Result<Option<Row>> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers SET status = COALESCE($4, status), updated_at = $5,
           activated_at = CASE WHEN $4 = 'active' AND activated_at IS NULL THEN $5 ELSE activated_at END,
           terminated_at = CASE WHEN $4 = 'terminated' THEN $5 ELSE terminated_at END
           WHERE id = $1 AND org_id = $2 AND status = ANY($3) RETURNING id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        id,
        org_id as OrgId,
        from as &[Status],
        to as Option<Status>,
        at,
    )
    .fetch_optional(conn)
    .await
}

/// Server `id`'s status, if it is a server of `org_id`.
pub async fn status_in_org(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: Uuid,
) -> sqlx::Result<Option<Status>> {
    sqlx::query_scalar!(
        r#"SELECT status AS "status: Status" FROM servers WHERE id = $1 AND org_id = $2"#,
        id,
        org_id as OrgId,
    )
    .fetch_optional(conn)
    .await
}

/// Store server `id`'s sealed access credentials.
pub async fn set_credentials(
    conn: &mut PgConnection,
    id: Uuid,
    sealed: Vec<u8>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE servers SET credentials = $2 WHERE id = $1",
        id,
        sealed,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Remember the provider's reference for server `id`.
pub async fn set_provider_ref(
    conn: &mut PgConnection,
    id: Uuid,
    reference: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE servers SET provider_ref = $2 WHERE id = $1",
        id,
        reference,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record why provisioning server `id` failed (at most 500 characters).
pub async fn set_failure(conn: &mut PgConnection, id: Uuid, why: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE servers SET failure = $2 WHERE id = $1",
        id,
        why.chars().take(500).collect::<String>(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Move server `id` to plan `sku_id`; returns the row after it.
pub async fn set_sku(conn: &mut PgConnection, id: Uuid, sku_id: &str) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers SET sku_id = $2 WHERE id = $1 RETURNING id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        id,
        sku_id,
    )
    .fetch_one(conn)
    .await
}

/// Move server `id` to organization `to` at `at`; a live server of `to` with
/// the same hostname violates [`super::HOSTNAME_PER_ORG`].
pub async fn set_org(
    conn: &mut PgConnection,
    id: Uuid,
    to: OrgId,
    at: OffsetDateTime,
) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers SET org_id = $2, updated_at = $3 WHERE id = $1 RETURNING id, org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status", fulfilment, provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        id,
        to as OrgId,
        at,
    )
    .fetch_one(conn)
    .await
}

/// Queue provisioning of server `id` at the provider, due at `at`.
pub async fn enqueue_job(
    conn: &mut PgConnection,
    id: Uuid,
    at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO provision_jobs (server_id, due_at) VALUES ($1, $2)",
        id,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A provisioning job: its server and the provider errors it has met.
pub struct Job {
    pub server_id: Uuid,
    pub attempts: i32,
}

/// The job due first at `now`, locked until the transaction ends (jobs other
/// replicas hold are skipped: `FOR UPDATE SKIP LOCKED`).
pub async fn claim_job(conn: &mut PgConnection, now: OffsetDateTime) -> sqlx::Result<Option<Job>> {
    sqlx::query_as!(
        Job,
        "SELECT server_id, attempts FROM provision_jobs WHERE due_at <= $1 \
         ORDER BY due_at LIMIT 1 FOR UPDATE SKIP LOCKED",
        now,
    )
    .fetch_optional(conn)
    .await
}

/// Make server `id`'s job due again at `due_at`, counting one more attempt
/// when it met an error.
pub async fn reschedule_job(
    conn: &mut PgConnection,
    id: Uuid,
    due_at: OffsetDateTime,
    error: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE provision_jobs SET due_at = $2, attempts = attempts + $3 WHERE server_id = $1",
        id,
        due_at,
        i32::from(error),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Drop server `id`'s provisioning job, if any.
pub async fn drop_job(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM provision_jobs WHERE server_id = $1", id,)
        .execute(conn)
        .await?;
    Ok(())
}

/// Store product event `id` of `kind` (its JSON `payload`) for server `server`.
pub async fn insert_event(
    conn: &mut PgConnection,
    id: Uuid,
    org_id: OrgId,
    server: Uuid,
    kind: &str,
    payload: &str,
    at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO events (id, org_id, server_id, type, payload, created_at) \
         VALUES ($1, $2, $3, $4, $5::text::jsonb, $6)",
        id,
        org_id as OrgId,
        server,
        kind,
        payload,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Every product event of `org_id`, oldest first (the export).
pub async fn events_of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<serde_json::Value>> {
    sqlx::query_scalar!(
        "SELECT payload FROM events WHERE org_id = $1 ORDER BY created_at, id",
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// Open a usage period for `row` at `at` (activation, resize, transfer in).
pub async fn open_usage(
    conn: &mut PgConnection,
    row: &Row,
    at: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO usage_periods (server_id, org_id, sku_id, started_at) VALUES ($1, $2, $3, $4)",
        row.id,
        row.org_id as OrgId,
        &row.sku_id,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether server `id` has an open usage period.
pub async fn has_open_usage(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM usage_periods WHERE server_id = $1 AND ended_at IS NULL) AS "open!""#,
        id,
    )
    .fetch_one(conn)
    .await
}

/// One usage period of a server, its length counted up to `now` while open.
pub struct Period {
    pub server_id: Uuid,
    pub plan: String,
    pub started_at: OffsetDateTime,
    pub ended_at: Option<OffsetDateTime>,
    pub seconds: i64,
}

/// Every usage period of `org_id`, by server then start.
pub async fn usage_of_org(
    pool: &PgPool,
    org_id: OrgId,
    now: OffsetDateTime,
) -> sqlx::Result<Vec<Period>> {
    sqlx::query_as!(
        Period,
        r#"SELECT server_id, sku_id AS plan, started_at, ended_at,
           floor(extract(epoch FROM (COALESCE(ended_at, $2) - started_at)))::bigint AS "seconds!"
         FROM usage_periods WHERE org_id = $1 ORDER BY server_id, started_at"#,
        org_id as OrgId,
        now,
    )
    .fetch_all(pool)
    .await
}
