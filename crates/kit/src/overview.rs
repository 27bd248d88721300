//! What waits for a person in one service: `GET /v1/admin/overview` (staff),
//! served by every internal service. The gateway asks each service for its
//! part and answers staff with the whole (cached for a few seconds), so this
//! runs at most once per service per cache period, whoever asks.
//!
//! A part is the service's queues (each a count and the oldest item's age,
//! read through a partial index over what waits, never a scan of what is
//! done) and the dead letters of its consumers.

use crate::{assertion::StaffCaller, deadletter, ApiResult};
use actix_web::{web, HttpResponse};
pub use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::{collections::BTreeMap, time::Duration};
use time::OffsetDateTime;

/// One queue: how many items wait, how old the oldest is, and (for queues
/// with deadlines) how many are past theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queue {
    pub count: i64,
    /// Whole seconds since the oldest item entered the queue; None when empty.
    pub oldest_age_secs: Option<i64>,
    /// Items past their deadline (only queues that have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub past_due: Option<i64>,
}

impl Queue {
    /// `count` items, the oldest entered at `oldest`, seen at `now`.
    pub fn of(count: i64, oldest: Option<OffsetDateTime>, now: OffsetDateTime) -> Queue {
        Queue {
            count,
            oldest_age_secs: oldest.map(|t| (now - t).whole_seconds().max(0)),
            past_due: None,
        }
    }

    /// The same, with how many are past their deadline.
    pub fn past_due(self, n: i64) -> Queue {
        Queue {
            past_due: Some(n),
            ..self
        }
    }
}

/// A service's queues by name (`kyc_submissions_pending`, ...), counted
/// against its own pool at `now`.
pub type Counter = fn(sqlx::PgPool, OffsetDateTime) -> BoxFuture<'static, sqlx::Result<Queues>>;

/// Queues by name.
pub type Queues = BTreeMap<String, Queue>;

/// One service's part of the overview.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    pub queues: Queues,
    /// Dead letters per consumer of this service (consumers with none are
    /// left out); None when NATS could not say.
    pub dead_letters: Option<BTreeMap<String, u64>>,
}

/// What a service's overview route reads (its app data).
pub struct Source {
    pub pool: sqlx::PgPool,
    pub js: async_nats::jetstream::Context,
    pub naming: event_contracts::Naming,
    /// The service's consumers are named `<prefix>...` (`org-billing-`).
    pub prefix: String,
    pub counter: Option<Counter>,
}

/// How long the DLQ may take to answer before the part goes without it.
const DEAD_LETTERS_WAIT: Duration = Duration::from_secs(2);

/// GET /v1/admin/overview (staff): this service's [`Part`].
pub async fn part(_staff: StaffCaller, src: web::Data<Source>) -> ApiResult<HttpResponse> {
    let now = OffsetDateTime::now_utc();
    let queues = match src.counter {
        Some(count) => count(src.pool.clone(), now).await?,
        None => Queues::new(),
    };
    let dead_letters = match tokio::time::timeout(
        DEAD_LETTERS_WAIT,
        deadletter::by_consumer(&src.js, &src.naming, &src.prefix),
    )
    .await
    {
        Ok(Ok(d)) => Some(d),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot count the dead letters");
            None
        }
        Err(_) => {
            tracing::warn!("the DLQ did not answer in time");
            None
        }
    };
    Ok(HttpResponse::Ok().json(Part {
        queues,
        dead_letters,
    }))
}

/// The route, on every internal service.
pub const PATH: &str = "/v1/admin/overview";

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(PATH, crate::methods::get().to(part));
}

#[cfg(test)]
mod tests {
    use super::Queue;
    use time::{Duration, OffsetDateTime};

    #[test]
    fn a_queue_tells_its_oldest_age_and_nothing_when_empty() {
        let now = OffsetDateTime::now_utc();
        let q = Queue::of(3, Some(now - Duration::seconds(90)), now);
        assert_eq!(q.oldest_age_secs, Some(90));
        assert_eq!(Queue::of(0, None, now).oldest_age_secs, None);
        // A clock a little behind the database's is not a negative age.
        assert_eq!(
            Queue::of(1, Some(now + Duration::seconds(2)), now).oldest_age_secs,
            Some(0)
        );
        let json = serde_json::to_value(q.past_due(1)).expect("serializes");
        assert_eq!(json["past_due"], 1);
        assert!(serde_json::to_value(q)
            .expect("serializes")
            .get("past_due")
            .is_none());
    }
}
