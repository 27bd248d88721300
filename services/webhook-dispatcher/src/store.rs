//! webhook-dispatcher's storage for its routes: endpoints (`endpoints`) and
//! the delivery log (`delivery_log`: each delivery with its latest outcome)
//! and manual retries, checked at compile time. Functions take the caller's connection or transaction (the handler
//! decides the boundary); the delivery worker and the fan-out keep their own
//! statements.

use hub_domain::{DeliveryId, EndpointId, OrgId, UserId};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

/// What an endpoint or delivery step may refuse, apart from database errors.
#[derive(Debug)]
pub enum Error {
    /// No such live endpoint, or no such delivery of it.
    NotFound,
    Db(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Db(e)
    }
}

/// A live endpoint (never its secret).
#[derive(Serialize)]
pub struct Endpoint {
    pub id: EndpointId,
    pub org_id: OrgId,
    pub url: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

hub_domain::text_enum! {
    /// A delivery's state after its latest attempt (`outcomes.status`, and
    /// `delivery_log.status`: `pending` until one is settled).
    pub enum DeliveryStatus: "delivery status" {
        /// Not attempted yet, or another attempt is due.
        Pending = "pending",
        Delivered = "delivered",
        /// Out of attempts, or stopped by its endpoint's deletion.
        Failed = "failed",
    }
}

/// One row of the delivery log.
#[derive(Serialize)]
pub struct Delivery {
    pub id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub event: String,
    pub event_id: uuid::Uuid,
    /// 0 for the first attempt series; each manual retry starts the next.
    pub series: i32,
    pub attempts: i32,
    pub status: DeliveryStatus,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub delivered_at: Option<OffsetDateTime>,
}

/// Live endpoint `id`.
pub async fn live(pool: &PgPool, id: EndpointId) -> Result<Endpoint, Error> {
    sqlx::query_as!(
        Endpoint,
        r#"SELECT id AS "id: EndpointId", org_id AS "org_id: OrgId", url, created_at FROM endpoints
            WHERE id = $1 AND deleted_at IS NULL"#,
        id as EndpointId,
    )
    .fetch_optional(pool)
    .await?
    .ok_or(Error::NotFound)
}

/// Serialize endpoint creations of `org_id` until the transaction ends.
pub async fn lock_org(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        format!("webhook-endpoints:{org_id}"),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// How many live endpoints `org_id` has.
pub async fn live_count(conn: &mut PgConnection, org_id: OrgId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM endpoints WHERE org_id = $1 AND deleted_at IS NULL"#,
        org_id as OrgId,
    )
    .fetch_one(conn)
    .await
}

/// An endpoint to create, its secret sealed.
pub struct NewEndpoint<'a> {
    pub id: EndpointId,
    pub org_id: OrgId,
    pub url: &'a str,
    pub sealed_secret: Vec<u8>,
    pub created_by: UserId,
    pub at: OffsetDateTime,
}

/// Store endpoint `e`.
pub async fn create(conn: &mut PgConnection, e: NewEndpoint<'_>) -> sqlx::Result<Endpoint> {
    sqlx::query_as!(
        Endpoint,
        r#"INSERT INTO endpoints (id, org_id, url, secret, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6)
           RETURNING id AS "id: EndpointId", org_id AS "org_id: OrgId", url, created_at"#,
        e.id as EndpointId,
        e.org_id as OrgId,
        e.url,
        e.sealed_secret,
        e.created_by as UserId,
        e.at,
    )
    .fetch_one(conn)
    .await
}

/// `org_id`'s live endpoints, oldest first (at most 500).
pub async fn of_org(pool: &PgPool, org_id: OrgId) -> sqlx::Result<Vec<Endpoint>> {
    sqlx::query_as!(
        Endpoint,
        r#"SELECT id AS "id: EndpointId", org_id AS "org_id: OrgId", url, created_at FROM endpoints
            WHERE org_id = $1 AND deleted_at IS NULL
            ORDER BY created_at, id LIMIT 500"#,
        org_id as OrgId,
    )
    .fetch_all(pool)
    .await
}

/// Delete live endpoint `id` at `at` and stop its pending deliveries (failed,
/// "endpoint deleted"). True when some of them were leased (due after `at`):
/// an attempt at them may be waiting in some replica's memory, so the caller
/// waits [`crate::worker::FENCE_WAIT`] after committing before it answers.
pub async fn delete(
    conn: &mut PgConnection,
    id: EndpointId,
    at: OffsetDateTime,
) -> Result<bool, Error> {
    let gone = sqlx::query!(
        "UPDATE endpoints SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL",
        id as EndpointId,
        at,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if gone == 0 {
        return Err(Error::NotFound);
    }
    // Its queued deliveries leave the queue with a last outcome saying why
    // (keeping the last status code seen). An attempt in flight finds its
    // row gone and records nothing; one waiting for a slot, or leased by a
    // fan-out or claim that committed before this (the endpoint row's lock
    // orders them), is not sent (see `worker::Dispatch::cleared`). The queue
    // has no index by endpoint: it holds only what waits, and deletions are
    // rare.
    let leased = sqlx::query_scalar!(
        r#"WITH gone AS (DELETE FROM queue WHERE endpoint_id = $1 RETURNING delivery_id, attempts, due_at),
         logged AS (
           INSERT INTO outcomes (delivery_id, seq, attempts, status, status_code, error, at)
           SELECT g.delivery_id, g.attempts + 1, g.attempts, 'failed',
             (SELECT o.status_code FROM outcomes o WHERE o.delivery_id = g.delivery_id ORDER BY o.seq DESC LIMIT 1),
             'endpoint deleted', $2
           FROM gone g)
         SELECT EXISTS (SELECT 1 FROM gone WHERE due_at > $2 AND due_at <> $3) AS "leased!""#,
        id as EndpointId,
        at,
        crate::worker::PARKED,
    )
    .fetch_one(conn)
    .await?;
    Ok(leased)
}

/// Make `sealed` endpoint `id`'s secret; the current one keeps signing
/// beside it until `until`.
pub async fn rotate_secret(
    conn: &mut PgConnection,
    id: EndpointId,
    sealed: Vec<u8>,
    until: OffsetDateTime,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE endpoints SET previous_secret = secret, previous_until = $3, secret = $2 WHERE id = $1",
        id as EndpointId,
        sealed,
        until,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Endpoint `id`'s last 50 deliveries, newest first.
pub async fn deliveries(pool: &PgPool, endpoint: EndpointId) -> sqlx::Result<Vec<Delivery>> {
    sqlx::query_as!(
        Delivery,
        r#"SELECT id AS "id!: DeliveryId", endpoint_id AS "endpoint_id!: EndpointId", event_type AS "event!",
             event_id AS "event_id!", series AS "series!", attempts AS "attempts!",
             status AS "status!: DeliveryStatus",
             last_status_code, last_error, created_at AS "created_at!", updated_at AS "updated_at!", delivered_at
           FROM delivery_log WHERE endpoint_id = $1 ORDER BY created_at DESC, id DESC LIMIT 50"#,
        endpoint as EndpointId,
    )
    .fetch_all(pool)
    .await
}

/// Lock live endpoint `id` (its retries take turns; a deletion waits).
pub async fn lock_live(conn: &mut PgConnection, id: EndpointId) -> Result<(), Error> {
    sqlx::query_scalar!(
        "SELECT id FROM endpoints WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE",
        id as EndpointId,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(Error::NotFound)?;
    Ok(())
}

/// The latest attempt series of the delivery (event at endpoint) that row
/// `delivery` of `endpoint` belongs to.
pub async fn latest_series(
    conn: &mut PgConnection,
    delivery: DeliveryId,
    endpoint: EndpointId,
) -> Result<i32, Error> {
    sqlx::query_scalar!(
        "SELECT max(x.series) FROM deliveries d \
         JOIN deliveries x ON x.endpoint_id = d.endpoint_id AND x.event_id = d.event_id \
         WHERE d.id = $1 AND d.endpoint_id = $2",
        delivery as DeliveryId,
        endpoint as EndpointId,
    )
    .fetch_one(conn)
    .await?
    .ok_or(Error::NotFound)
}

/// Queue row `delivery`'s event again at `endpoint` as attempt series
/// `series`, due at `at`: a new log row, not yet attempted.
pub async fn requeue(
    conn: &mut PgConnection,
    delivery: DeliveryId,
    endpoint: EndpointId,
    series: i32,
    at: OffsetDateTime,
) -> sqlx::Result<Delivery> {
    sqlx::query_as!(
        Delivery,
        r#"WITH logged AS (
             INSERT INTO deliveries (endpoint_id, event_id, series, created_at)
             SELECT d.endpoint_id, d.event_id, $3, $4 FROM deliveries d
             WHERE d.id = $1 AND d.endpoint_id = $2
             RETURNING id, endpoint_id, event_id, series, created_at),
           queued AS (
             INSERT INTO queue (delivery_id, endpoint_id, event_id, due_at)
             SELECT id, endpoint_id, event_id, $4 FROM logged)
           SELECT l.id AS "id!: DeliveryId", l.endpoint_id AS "endpoint_id!: EndpointId", ev.event_type AS "event!",
             l.event_id AS "event_id!", l.series AS "series!", 0 AS "attempts!",
             'pending' AS "status!: DeliveryStatus",
             NULL::int AS last_status_code, NULL::text AS last_error,
             l.created_at AS "created_at!", l.created_at AS "updated_at!", NULL::timestamptz AS delivered_at
           FROM logged l JOIN events ev ON ev.id = l.event_id"#,
        delivery as DeliveryId,
        endpoint as EndpointId,
        series,
        at,
    )
    .fetch_one(conn)
    .await
}
