//! Group commit for the token endpoint's refreshes: a refresh is a write (the
//! token spent, its successor stored), and a transaction of its own per
//! refresh made the commit and the round trips most of Postgres' share of a
//! refresh. `oidc.refresh_writers` tasks each take the refreshes waiting at
//! that moment (up to `oidc.refresh_batch`) and apply them in one statement
//! and one transaction ([`oauth::refresh_batch`]); each is answered after
//! that commit. Refreshes are routed by their token's hash, so two uses of
//! one token meet in one writer: the second of a batch is not sent with the
//! first (it goes the slow way, where it is seen as the reuse it is).

use crate::oauth::{self, Grant, RefreshAsk, Subject};
use service_kit::{
    group_commit::{Batch, GroupCommit, Shape},
    metrics::CommitMetrics,
    ApiError,
};
use sqlx::PgPool;
use std::collections::HashSet;
use tokio_util::sync::CancellationToken;

/// What a refresh came to: the grant and the person (the token was spent and
/// its successor stored), or None (nothing written: the caller looks why).
pub type Refreshed = Option<(Grant, Subject)>;

/// The refreshes' writers: submit with [`Refreshes::refresh`].
#[derive(Clone)]
pub struct Refreshes(GroupCommit<Asks>);

impl Refreshes {
    /// Start the writers; they stop when `cancel` fires (after applying
    /// what was queued).
    pub fn spawn(
        pool: PgPool,
        writers: usize,
        max_batch: usize,
        cancel: CancellationToken,
        metrics: CommitMetrics,
    ) -> (Refreshes, Vec<tokio::task::JoinHandle<()>>) {
        let shape = Shape {
            writers,
            max_batch,
            grace: std::time::Duration::ZERO,
        };
        let (w, tasks) = GroupCommit::spawn(shape, cancel, metrics, || Asks { pool: pool.clone() });
        (Refreshes(w), tasks)
    }

    /// Apply `ask` with whatever else is waiting; returns once committed.
    pub async fn refresh(&self, ask: RefreshAsk) -> Result<Refreshed, ApiError> {
        let key = ask
            .token_hash
            .iter()
            .take(16)
            .fold(0u128, |k, b| (k << 8) | u128::from(*b));
        self.0.submit(key, ask).await?
    }
}

/// One writer's batch of refreshes.
pub struct Asks {
    pool: PgPool,
}

impl Batch for Asks {
    type Item = RefreshAsk;
    type Output = Result<Refreshed, ApiError>;
    /// A refresh whose requester went away is dropped: its new token would
    /// reach no one, and the spent one would look reused at the retry.
    const DROP_ABANDONED: bool = true;

    fn name(&self) -> &'static str {
        "oauth-refresh"
    }

    async fn apply(&mut self, batch: &[RefreshAsk]) -> Vec<Self::Output> {
        // The first ask of each token goes in; a second use of one token in
        // the same batch is answered None, and the slow way sees it used.
        let mut seen = HashSet::new();
        let first: Vec<bool> = batch
            .iter()
            .map(|a| seen.insert(a.token_hash.as_slice()))
            .collect();
        let distinct: Vec<&RefreshAsk> = batch
            .iter()
            .zip(&first)
            .filter_map(|(a, f)| f.then_some(a))
            .collect();
        match apply(&self.pool, &distinct).await {
            Ok(done) => {
                let mut done = done.into_iter();
                first
                    .iter()
                    .map(|f| Ok(if *f { done.next().flatten() } else { None }))
                    .collect()
            }
            Err(err) => {
                tracing::error!(error = %err, refreshes = batch.len(), "a batch of refreshes failed");
                batch
                    .iter()
                    .map(|_| Err(ApiError::Unavailable("the refresh failed; retry".into())))
                    .collect()
            }
        }
    }
}

/// One statement, so one transaction of its own (no BEGIN, no COMMIT round
/// trips).
async fn apply(pool: &PgPool, asks: &[&RefreshAsk]) -> sqlx::Result<Vec<Refreshed>> {
    let mut conn = pool.acquire().await?;
    oauth::refresh_batch(&mut conn, asks).await
}
