//! server-product's part of the staff overview ([`service_kit::overview`]):
//! servers waiting for manual fulfilment, and how many of them are past the
//! SLA their SKU promised (read through the fulfilment queue's partial index).

use service_kit::overview::{BoxFuture, Queue, Queues};
use sqlx::PgPool;
use time::OffsetDateTime;

pub fn count(pool: PgPool, now: OffsetDateTime) -> BoxFuture<'static, sqlx::Result<Queues>> {
    Box::pin(async move {
        let r = sqlx::query!(
            r#"SELECT count(*) AS "count!", min(created_at) AS oldest,
                      count(*) FILTER (WHERE due_at < $1) AS "past_due!"
                 FROM servers WHERE status = 'pending_fulfilment'"#,
            now,
        )
        .fetch_one(&pool)
        .await?;
        Ok([(
            "fulfilment_queue".to_owned(),
            Queue::of(r.count, r.oldest, now).past_due(r.past_due),
        )]
        .into())
    })
}
