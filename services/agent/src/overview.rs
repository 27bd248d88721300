//! The agent's part of the staff overview ([`service_kit::overview`]):
//! platform proposals customers filed that staff have not yet decided.

use service_kit::overview::{BoxFuture, Queue, Queues};
use sqlx::PgPool;
use time::OffsetDateTime;

pub fn count(pool: PgPool, now: OffsetDateTime) -> BoxFuture<'static, sqlx::Result<Queues>> {
    Box::pin(async move {
        let r = sqlx::query!(
            r#"SELECT count(*) AS "count!", min(created_at) AS oldest
                 FROM proposals WHERE status = 'draft'"#
        )
        .fetch_one(&pool)
        .await?;
        Ok([(
            "proposals_draft".to_owned(),
            Queue::of(r.count, r.oldest, now),
        )]
        .into())
    })
}
