//! The group commit of a [`Book`]: the kit's [`GroupCommit`] with a batch that
//! holds one Postgres connection of its own (a batch costs one round trip and no
//! pool checkout), drops moves past their deadline, and maps a failed batch to
//! what its callers can do about it (retry now, or retry with the same
//! Idempotency-Key).

use super::book::{batch_limit, Book, Move, OUTCOME_UNKNOWN};
use service_kit::{
    group_commit::{Batch, GroupCommit, Shape},
    metrics::CommitMetrics,
    outbox::Outbox,
    ApiError,
};
use sqlx::{postgres::PgConnectOptions, Connection, PgConnection};
use std::{
    marker::PhantomData,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

/// How a writer reaches Postgres.
#[derive(Clone)]
pub struct WriterDb {
    pub options: PgConnectOptions,
    pub connect_timeout: Duration,
    /// A held connection idle at least this long is pinged before use.
    pub ping_if_idle: Duration,
    /// The connection's statement timeout: a batch never runs longer.
    pub batch_timeout: Duration,
}

/// The writers of book `B`: submit a move with [`Writer::apply`].
pub struct Writer<B: Book>(GroupCommit<Moves<B>>);

impl<B: Book> Clone for Writer<B> {
    fn clone(&self) -> Self {
        Writer(self.0.clone())
    }
}

impl<B: Book> Writer<B> {
    /// Start `shape.writers` writers, each owning the organizations whose id
    /// falls in its shard, each with a connection of its own (opened with
    /// `db`, reopened after an error).
    pub fn spawn(
        db: WriterDb,
        outbox: Outbox,
        shape: Shape,
        cancel: CancellationToken,
        metrics: CommitMetrics,
    ) -> (Writer<B>, Vec<tokio::task::JoinHandle<()>>) {
        let (w, tasks) = GroupCommit::spawn(shape, cancel, metrics, || Moves {
            db: db.clone(),
            outbox: outbox.clone(),
            held: None,
            book: PhantomData,
        });
        (Writer(w), tasks)
    }

    /// Apply `m` with whatever else is waiting for the same writer; returns once
    /// its transaction committed.
    pub async fn apply(&self, m: Move) -> Result<B::Applied, ApiError> {
        self.0.submit(m.org_id.as_uuid().as_u128(), m).await?
    }
}

/// One writer's batch: its connection and where it reports.
pub struct Moves<B> {
    db: WriterDb,
    outbox: Outbox,
    held: Option<(PgConnection, Instant)>,
    book: PhantomData<fn() -> B>,
}

/// Why a whole batch failed.
#[derive(Debug, thiserror::Error)]
enum BatchError {
    /// No connection: nothing of the batch was sent.
    #[error("{0}")]
    Connect(sqlx::Error),
    #[error("{0}")]
    Db(sqlx::Error),
    #[error("the writer connection did not answer within the batch timeout")]
    Hung,
}

fn not_applied<B: Book>() -> ApiError {
    ApiError::Unavailable(B::NOT_APPLIED.into())
}

impl BatchError {
    fn to_api<B: Book>(&self) -> ApiError {
        match self {
            // Cancelled by the statement timeout: rolled back, nothing applied.
            BatchError::Db(sqlx::Error::Database(d)) if d.code().as_deref() == Some("57014") => {
                not_applied::<B>()
            }
            // Postgres could not be reached before anything was sent: not
            // applied (the gateway and the client may retry at once).
            BatchError::Connect(_) => not_applied::<B>(),
            // The connection broke during the batch: an outage (503 with
            // Retry-After), its outcome unknown (it may have committed), so
            // never retried here; a retry with the same Idempotency-Key is safe.
            BatchError::Db(e) if service_kit::outage::classify_sqlx(e).is_some() => {
                ApiError::Unavailable(OUTCOME_UNKNOWN.into())
            }
            // The connection stopped answering mid-batch: the same.
            BatchError::Hung => ApiError::Unavailable(OUTCOME_UNKNOWN.into()),
            // Outcome unknown (it may have committed): never retried here.
            other => ApiError::internal(anyhow::anyhow!("{} batch failed: {other}", B::FUNCTION)),
        }
    }

    /// An outage is logged once per cause and interval; anything else each time.
    fn log<B: Book>(&self, moves: usize) {
        match self {
            BatchError::Connect(d) | BatchError::Db(d) => {
                if let Some(o) = service_kit::outage::classify_sqlx(d) {
                    service_kit::outage::report(&o);
                    return;
                }
            }
            BatchError::Hung => {}
        }
        tracing::error!(error = %self, moves, book = B::FUNCTION, "batch failed");
    }
}

impl<B: Book> Moves<B> {
    /// The connection for the next batch: the one held (pinged first if it sat
    /// idle, since Postgres may have gone away meanwhile), else a new one.
    async fn ready(&mut self) -> sqlx::Result<PgConnection> {
        if let Some((mut c, last_used)) = self.held.take() {
            if last_used.elapsed() < self.db.ping_if_idle || c.ping().await.is_ok() {
                return Ok(c);
            }
        }
        tokio::time::timeout(
            self.db.connect_timeout,
            PgConnection::connect_with(&self.db.options),
        )
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    /// The batch in one statement; Postgres cancels it at `batch_timeout`, and
    /// the rest of `batch_limit` covers a connection that does not answer.
    async fn run(
        &mut self,
        moves: &[Move],
    ) -> Result<Vec<Result<B::Applied, ApiError>>, BatchError> {
        let mut c = self.ready().await.map_err(BatchError::Connect)?;
        let outcomes = tokio::time::timeout(
            batch_limit(self.db.batch_timeout),
            super::book::apply::<B>(&mut c, moves),
        )
        .await
        .map_err(|_| BatchError::Hung)?
        .map_err(BatchError::Db)?;
        // Kept only after success: after an error the connection's state is
        // unknown, and the next batch opens a new one.
        self.held = Some((c, Instant::now()));
        Ok(outcomes
            .into_iter()
            .map(|o| o.map_err(ApiError::from))
            .collect())
    }
}

impl<B: Book> Batch for Moves<B> {
    type Item = Move;
    type Output = Result<B::Applied, ApiError>;
    /// A move applied after its caller gave up (a gateway 504, a client
    /// timeout) would be applied again by the retry.
    const DROP_ABANDONED: bool = true;

    fn name(&self) -> &'static str {
        B::FUNCTION
    }

    fn refuse_late(&self, m: &Move) -> Option<Self::Output> {
        (m.deadline <= Instant::now()).then(|| Err(not_applied::<B>()))
    }

    async fn apply(&mut self, moves: &[Move]) -> Vec<Self::Output> {
        let started = Instant::now();
        match self.run(moves).await {
            Ok(outcomes) => {
                tracing::debug!(
                    moves = moves.len(),
                    elapsed_us = started.elapsed().as_micros() as u64,
                    book = B::FUNCTION,
                    "batch committed"
                );
                if outcomes.iter().any(Result::is_ok) {
                    self.outbox.kick();
                }
                outcomes
            }
            Err(e) => {
                e.log::<B>(moves.len());
                moves.iter().map(|_| Err(e.to_api::<B>())).collect()
            }
        }
    }
}
