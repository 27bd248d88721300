//! webhook-dispatcher's part of the staff overview
//! ([`service_kit::overview`]): endpoints failing, that is with a delivery
//! waiting for another attempt after at least one failed, and the age of the
//! oldest such event. The queue holds only what waits (delivered and given-up
//! deliveries leave it), so this reads no history.

use service_kit::overview::{BoxFuture, Queue, Queues};
use sqlx::PgPool;
use time::OffsetDateTime;

pub fn count(pool: PgPool, now: OffsetDateTime) -> BoxFuture<'static, sqlx::Result<Queues>> {
    Box::pin(async move {
        let r = sqlx::query!(
            r#"SELECT count(DISTINCT q.endpoint_id) AS "count!", min(e.created_at) AS oldest
                 FROM queue q JOIN events e ON e.id = q.event_id
                WHERE q.attempts > 0"#
        )
        .fetch_one(&pool)
        .await?;
        Ok([(
            "webhook_endpoints_failing".to_owned(),
            Queue::of(r.count, r.oldest, now),
        )]
        .into())
    })
}
