//! server-product's storage of servers and what hangs off them (`servers`,
//! `provision_jobs`, `usage_periods`, `events`), checked at compile time.
//! Functions take the caller's connection or transaction (the handler or the
//! worker decides the boundary) and answer sqlx's errors: the route maps the
//! one constraint a client can hit, [`super::model::HOSTNAME_PER_ORG`], through
//! `OnConstraint`. Rows come back typed (the status a [`Status`]).

use super::model::{Event, Row, Status};
use crate::skus::Fulfilment;
use hub_domain::{OrgId, ServerId, UserId};
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// Insert `rows` (new servers, each with its creator in `created_by`) in one
/// statement, all but those whose hostname a live server of their
/// organization holds (already, or earlier in `rows`): the partial unique
/// index [`super::model::HOSTNAME_PER_ORG`], `ON CONFLICT DO NOTHING`. Returns the
/// ids inserted.
pub async fn insert_servers(
    conn: &mut PgConnection,
    rows: &[&Row],
    created_by: &[UserId],
) -> sqlx::Result<Vec<ServerId>> {
    let ids: Vec<ServerId> = rows.iter().map(|r| r.id).collect();
    let orgs: Vec<OrgId> = rows.iter().map(|r| r.org_id).collect();
    let skus: Vec<&str> = rows.iter().map(|r| r.sku_id.as_str()).collect();
    let hostnames: Vec<&str> = rows.iter().map(|r| r.hostname.as_str()).collect();
    let statuses: Vec<Status> = rows.iter().map(|r| r.status).collect();
    let fulfilments: Vec<Fulfilment> = rows.iter().map(|r| r.fulfilment).collect();
    let due: Vec<Option<OffsetDateTime>> = rows.iter().map(|r| r.due_at).collect();
    let at: Vec<OffsetDateTime> = rows.iter().map(|r| r.created_at).collect();
    sqlx::query_scalar!(
        r#"INSERT INTO servers (id, org_id, sku_id, hostname, status, fulfilment, due_at, created_by,
           created_at, updated_at)
           SELECT s.id, s.org_id, s.sku_id, s.hostname, s.status, s.fulfilment, s.due_at, s.created_by, s.at, s.at
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[],
                         $7::timestamptz[], $8::uuid[], $9::timestamptz[])
               AS s(id, org_id, sku_id, hostname, status, fulfilment, due_at, created_by, at)
           ON CONFLICT (org_id, hostname) WHERE status NOT IN ('terminated', 'failed') DO NOTHING
           RETURNING id AS "id: ServerId""#,
        &ids as &[ServerId],
        &orgs as &[OrgId],
        &skus as &[&str],
        &hostnames as &[&str],
        &statuses as &[Status],
        &fulfilments as &[Fulfilment],
        &due as &[Option<OffsetDateTime>],
        created_by as &[UserId],
        &at,
    )
    .fetch_all(conn)
    .await
}

/// The live servers (neither terminated nor failed) of each of `orgs` that
/// has any, as the triggers of `org_servers` count them. No lock of its own:
/// the order batch reads rows its INSERT locked.
pub async fn live_servers(
    conn: &mut PgConnection,
    orgs: &[OrgId],
) -> sqlx::Result<Vec<(OrgId, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT org_id AS "org_id: OrgId", live::bigint AS "live!" FROM org_servers WHERE org_id = ANY($1)"#,
        orgs as &[OrgId],
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.org_id, r.live)).collect())
}

/// Remove the servers of `ids`, just inserted by the caller's transaction
/// (orders past the cap); the trigger takes them off the count.
pub async fn delete_servers(conn: &mut PgConnection, ids: &[ServerId]) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM servers WHERE id = ANY($1)", ids as &[ServerId])
        .execute(conn)
        .await?;
    Ok(())
}

/// Server `id`, no lock.
pub async fn find(conn: &mut PgConnection, id: ServerId) -> sqlx::Result<Option<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
                  fulfilment AS "fulfilment: Fulfilment", provider_ref,
                  credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at
             FROM servers WHERE id = $1"#,
        id as ServerId,
    )
    .fetch_optional(conn)
    .await
}

/// A page of `org_id`'s servers, newest first, strictly after `after`
/// (created_at, id) when given; `limit` rows at most.
pub async fn page_of_org(
    pool: &PgPool,
    org_id: OrgId,
    after: Option<(OffsetDateTime, ServerId)>,
    limit: i64,
) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
                  fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE org_id = $1
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
           ORDER BY created_at DESC, id DESC LIMIT $4"#,
        org_id as OrgId,
        after.map(|a| a.0),
        after.map(|a| a.1) as Option<ServerId>,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// `org_id`'s latest 1000 servers, newest first (the service contract's list).
pub async fn latest_of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
                  fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1000"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// Every server of `org_id`, oldest first (the export).
pub async fn all_of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
                  fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE org_id = $1 ORDER BY created_at, id"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// The manual fulfilment queue: the 500 pending servers due first.
pub async fn pending_fulfilment(pool: &PgPool) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"SELECT id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
                  fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at FROM servers WHERE status = 'pending_fulfilment' ORDER BY due_at, id LIMIT 500"#,
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
    id: ServerId,
    from: &[Status],
    to: Option<Status>,
    at: OffsetDateTime,
) -> sqlx::Result<Option<Row>> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers SET status = COALESCE($4, status), updated_at = $5,
           activated_at = CASE WHEN $4 = 'active' AND activated_at IS NULL THEN $5 ELSE activated_at END,
           terminated_at = CASE WHEN $4 = 'terminated' THEN $5 ELSE terminated_at END
           WHERE id = $1 AND org_id = $2 AND status = ANY($3) RETURNING id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
           fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        id as ServerId,
        org_id as OrgId,
        from as &[Status],
        to as Option<Status>,
        at,
    )
    .fetch_optional(conn)
    .await
}

/// Move each server of `ids` from one of `from` to `to` at `at`, storing its
/// sealed `credentials` (same order) in the same UPDATE: [`move_status`] for
/// a batch of the provisioning worker, conditional the same way. Returns the
/// rows that moved.
pub async fn move_status_with_credentials(
    conn: &mut PgConnection,
    ids: &[ServerId],
    credentials: &[Vec<u8>],
    from: &[Status],
    to: Status,
    at: OffsetDateTime,
) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers s SET credentials = u.credentials, status = $4, updated_at = $5,
           activated_at = CASE WHEN $4 = 'active' AND s.activated_at IS NULL THEN $5 ELSE s.activated_at END,
           terminated_at = CASE WHEN $4 = 'terminated' THEN $5 ELSE s.terminated_at END
           FROM unnest($1::uuid[], $2::bytea[]) AS u(id, credentials)
           WHERE s.id = u.id AND s.status = ANY($3) RETURNING s.id AS "id: ServerId", s.org_id AS "org_id: OrgId", s.sku_id, s.hostname, s.status AS "status: Status",
           s.fulfilment AS "fulfilment: Fulfilment", s.provider_ref, s.credentials, s.due_at, s.failure, s.created_at, s.updated_at, s.activated_at, s.terminated_at"#,
        ids as &[ServerId],
        credentials,
        from as &[Status],
        to as Status,
        at,
    )
    .fetch_all(conn)
    .await
}

/// Server `id`'s status, if it is a server of `org_id`.
pub async fn status_in_org(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: ServerId,
) -> sqlx::Result<Option<Status>> {
    sqlx::query_scalar!(
        r#"SELECT status AS "status: Status" FROM servers WHERE id = $1 AND org_id = $2"#,
        id as ServerId,
        org_id as OrgId,
    )
    .fetch_optional(conn)
    .await
}

/// Store server `id`'s sealed access credentials.
pub async fn set_credentials(
    conn: &mut PgConnection,
    id: ServerId,
    sealed: Vec<u8>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE servers SET credentials = $2 WHERE id = $1",
        id as ServerId,
        sealed,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Remember the provider's reference of each server of `ids` (`refs`, in
/// the same order): one statement for a batch of the worker.
pub async fn set_provider_refs(
    conn: &mut PgConnection,
    ids: &[ServerId],
    refs: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE servers s SET provider_ref = u.reference \
         FROM unnest($1::uuid[], $2::text[]) AS u(id, reference) WHERE s.id = u.id",
        ids as &[ServerId],
        refs,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record why provisioning server `id` failed (at most 500 characters).
pub async fn set_failure(conn: &mut PgConnection, id: ServerId, why: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE servers SET failure = $2 WHERE id = $1",
        id as ServerId,
        why.chars().take(500).collect::<String>(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Move server `id` to plan `sku_id`; returns the row after it.
pub async fn set_sku(conn: &mut PgConnection, id: ServerId, sku_id: &str) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers SET sku_id = $2 WHERE id = $1 RETURNING id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
           fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        id as ServerId,
        sku_id,
    )
    .fetch_one(conn)
    .await
}

/// Move server `id` to organization `to` at `at`; a live server of `to` with
/// the same hostname violates [`super::model::HOSTNAME_PER_ORG`].
pub async fn set_org(
    conn: &mut PgConnection,
    id: ServerId,
    to: OrgId,
    at: OffsetDateTime,
) -> sqlx::Result<Row> {
    sqlx::query_as!(
        Row,
        r#"UPDATE servers SET org_id = $2, updated_at = $3 WHERE id = $1 RETURNING id AS "id: ServerId", org_id AS "org_id: OrgId", sku_id, hostname, status AS "status: Status",
           fulfilment AS "fulfilment: Fulfilment", provider_ref, credentials, due_at, failure, created_at, updated_at, activated_at, terminated_at"#,
        id as ServerId,
        to as OrgId,
        at,
    )
    .fetch_one(conn)
    .await
}

/// Queue provisioning of the servers of `ids` at the provider, each due at
/// its `due_at`.
pub async fn enqueue_jobs(
    conn: &mut PgConnection,
    ids: &[ServerId],
    due_at: &[OffsetDateTime],
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO provision_jobs (server_id, due_at) SELECT * FROM unnest($1::uuid[], $2::timestamptz[])",
        ids as &[ServerId],
        due_at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A provisioning job taken by the worker: its server, locked with it, and
/// the provider errors it has met.
pub struct Claimed {
    pub attempts: i32,
    pub row: Row,
}

/// Up to `limit` jobs due at `now`, first due first, each locked with its
/// server until the transaction ends; jobs or servers another transaction
/// holds (another replica's worker, a termination in progress) are skipped
/// (`SKIP LOCKED`). The server is taken `FOR NO KEY UPDATE`, the lock every
/// lifecycle change takes first: no move can slip in between this read and
/// the worker's own, and a termination waits for the batch instead of
/// deadlocking with it (it would update the server, then wait for the job).
pub async fn claim_jobs(
    conn: &mut PgConnection,
    now: OffsetDateTime,
    limit: i64,
) -> sqlx::Result<Vec<Claimed>> {
    struct Flat {
        attempts: i32,
        id: ServerId,
        org_id: OrgId,
        sku_id: String,
        hostname: String,
        status: Status,
        fulfilment: Fulfilment,
        provider_ref: Option<String>,
        credentials: Option<Vec<u8>>,
        due_at: Option<OffsetDateTime>,
        failure: Option<String>,
        created_at: OffsetDateTime,
        updated_at: OffsetDateTime,
        activated_at: Option<OffsetDateTime>,
        terminated_at: Option<OffsetDateTime>,
    }
    let rows = sqlx::query_as!(
        Flat,
        r#"SELECT j.attempts, s.id AS "id: ServerId", s.org_id AS "org_id: OrgId", s.sku_id, s.hostname,
                  s.status AS "status: Status", s.fulfilment AS "fulfilment: Fulfilment", s.provider_ref, s.credentials, s.due_at, s.failure, s.created_at, s.updated_at,
                  s.activated_at, s.terminated_at
             FROM provision_jobs j JOIN servers s ON s.id = j.server_id
            WHERE j.due_at <= $1 ORDER BY j.due_at LIMIT $2
              FOR UPDATE OF j SKIP LOCKED FOR NO KEY UPDATE OF s SKIP LOCKED"#,
        now,
        limit,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|f| Claimed {
            attempts: f.attempts,
            row: Row {
                id: f.id,
                org_id: f.org_id,
                sku_id: f.sku_id,
                hostname: f.hostname,
                status: f.status,
                fulfilment: f.fulfilment,
                provider_ref: f.provider_ref,
                credentials: f.credentials,
                due_at: f.due_at,
                failure: f.failure,
                created_at: f.created_at,
                updated_at: f.updated_at,
                activated_at: f.activated_at,
                terminated_at: f.terminated_at,
            },
        })
        .collect())
}

/// Make the jobs of `ids` due again, each at its `due_at`, adding its
/// `errors` (0 or 1) to the provider errors it has met.
pub async fn reschedule_jobs(
    conn: &mut PgConnection,
    ids: &[ServerId],
    due_at: &[OffsetDateTime],
    errors: &[i32],
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE provision_jobs j SET due_at = u.due_at, attempts = j.attempts + u.errors \
         FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) AS u(id, due_at, errors) \
         WHERE j.server_id = u.id",
        ids as &[ServerId],
        due_at,
        errors,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Drop the provisioning jobs of the servers of `ids`, if any.
pub async fn drop_jobs(conn: &mut PgConnection, ids: &[ServerId]) -> sqlx::Result<()> {
    sqlx::query!(
        "DELETE FROM provision_jobs WHERE server_id = ANY($1)",
        ids as &[ServerId]
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Drop server `id`'s provisioning job, if any.
pub async fn drop_job(conn: &mut PgConnection, id: ServerId) -> sqlx::Result<()> {
    sqlx::query!(
        "DELETE FROM provision_jobs WHERE server_id = $1",
        id as ServerId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Store `events` of one `kind` (each for its server) in the history, in
/// one statement.
pub async fn insert_events<'a>(
    conn: &mut PgConnection,
    kind: &str,
    events: impl IntoIterator<Item = &'a Event>,
) -> sqlx::Result<()> {
    let (mut ids, mut orgs, mut servers, mut payloads, mut at) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for e in events {
        ids.push(e.message.id);
        orgs.push(e.org_id);
        servers.push(e.server_id);
        payloads.push(e.message.payload.as_str());
        at.push(e.created_at);
    }
    sqlx::query!(
        "INSERT INTO events (id, org_id, server_id, type, payload, created_at) \
         SELECT e.id, e.org_id, e.server_id, $1, e.payload::jsonb, e.at \
         FROM unnest($2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::timestamptz[]) \
           AS e(id, org_id, server_id, payload, at)",
        kind,
        &ids,
        &orgs as &[OrgId],
        &servers as &[ServerId],
        &payloads as &[&str],
        &at,
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
        row.id as ServerId,
        row.org_id as OrgId,
        &row.sku_id,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// [`open_usage`] for each of `rows` at `at`, in one statement.
pub async fn open_usage_all(
    conn: &mut PgConnection,
    rows: &[Row],
    at: OffsetDateTime,
) -> sqlx::Result<()> {
    let ids: Vec<ServerId> = rows.iter().map(|r| r.id).collect();
    let orgs: Vec<OrgId> = rows.iter().map(|r| r.org_id).collect();
    let skus: Vec<String> = rows.iter().map(|r| r.sku_id.clone()).collect();
    sqlx::query!(
        "INSERT INTO usage_periods (server_id, org_id, sku_id, started_at) \
         SELECT u.id, u.org_id, u.sku_id, $4 FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS u(id, org_id, sku_id)",
        &ids as &[ServerId],
        &orgs as &[OrgId],
        &skus,
        at,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether server `id` has an open usage period.
pub async fn has_open_usage(conn: &mut PgConnection, id: ServerId) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM usage_periods WHERE server_id = $1 AND ended_at IS NULL) AS "open!""#,
        id as ServerId,
    )
    .fetch_one(conn)
    .await
}

/// One usage period of a server, its length counted up to `now` while open.
pub struct Period {
    pub server_id: ServerId,
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
        r#"SELECT server_id AS "server_id: ServerId", sku_id AS plan, started_at, ended_at,
           floor(extract(epoch FROM (COALESCE(ended_at, $2) - started_at)))::bigint AS "seconds!"
         FROM usage_periods WHERE org_id = $1 ORDER BY server_id, started_at"#,
        org_id as OrgId,
        now,
    )
    .fetch_all(pool)
    .await
}
