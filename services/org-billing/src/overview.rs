//! org-billing's part of the staff overview ([`service_kit::overview`]):
//! payment claims waiting for review, billing runs not finished, and
//! suspended organizations (each read through a partial index over what
//! waits).

use service_kit::overview::{BoxFuture, Queue, Queues};
use sqlx::PgPool;
use time::OffsetDateTime;

pub fn count(pool: PgPool, now: OffsetDateTime) -> BoxFuture<'static, sqlx::Result<Queues>> {
    Box::pin(async move {
        let claims = sqlx::query!(
            r#"SELECT count(*) AS "count!", min(created_at) AS oldest
                 FROM payment_claims WHERE status = 'pending'"#
        )
        .fetch_one(&pool)
        .await?;
        let runs = sqlx::query!(
            r#"SELECT count(*) AS "count!", min(started_at) AS oldest
                 FROM billing_runs WHERE status = 'running'"#
        )
        .fetch_one(&pool)
        .await?;
        let suspended = sqlx::query!(
            r#"SELECT count(*) AS "count!", min(status_changed_at) AS oldest
                 FROM organizations WHERE status = 'suspended'"#
        )
        .fetch_one(&pool)
        .await?;
        Ok([
            (
                "payment_claims_pending",
                Queue::of(claims.count, claims.oldest, now),
            ),
            (
                "billing_runs_running",
                Queue::of(runs.count, runs.oldest, now),
            ),
            (
                "organizations_suspended",
                Queue::of(suspended.count, suspended.oldest, now),
            ),
        ]
        .into_iter()
        .map(|(k, q)| (k.to_owned(), q))
        .collect())
    })
}
