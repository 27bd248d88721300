//! Wallet and AI-token moves, applied in batches by `apply_wallet_moves` and
//! `apply_token_moves` (see their migrations): the two ledgers share this one
//! mechanism, each with writers of its own ([`Book`]).
//!
//! Every move locks its wallet row until it commits, so one busy wallet admits
//! one commit at a time however many requests wait. The [`Writer`] takes the
//! moves waiting at that moment and applies them in one call and one commit:
//! the function locks the wallets in id order (so batches never deadlock),
//! checks each move against the running balance in arrival order, appends one
//! ledger row per accepted move carrying the balance after it, writes the audit
//! events to the outbox and each wallet's final balance. A move is answered only
//! after the commit that holds it, and a refused move (409, or 404 for an
//! unknown wallet) does not affect the others. Correctness across replicas rests
//! on the row lock, not on the batching: each writer is an ordinary Postgres
//! client, and a move with an Idempotency-Key goes through the same function in
//! its own transaction.
//!
//! No late credits: a move enters a batch only while its caller still waits
//! and before its deadline (`ledger.queue_timeout_ms` after the request
//! arrived); otherwise it is dropped unapplied. A batch runs under a statement
//! timeout (`ledger.batch_timeout_ms`, set on the writer's connection), and the
//! writer stops waiting for a connection that does not answer shortly after
//! it, so a hung connection stalls its shard no longer than that. With both
//! below the gateway's upstream timeout, a 504 means the credit was not applied.

use hub_domain::{OrgId, UserId};
use service_kit::{outbox::Outbox, ApiError};
use sqlx::{postgres::PgConnectOptions, Connection, PgConnection};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub const BELOW_ZERO: &str = "the balance would go below zero";
pub const OVERFLOW: &str =
    "amount_minor would take the balance past the largest amount a wallet holds";
pub const NOT_APPLIED: &str = "the wallet is busy: the credit was not applied; retry";
pub const TOKENS_NOT_APPLIED: &str = "the AI-token balance is busy: nothing was applied; retry";
/// A batch whose connection broke or hung: it may have committed.
pub const OUTCOME_UNKNOWN: &str =
    "the database connection failed during the move: its outcome is not \
     known; retry with the same Idempotency-Key";
pub const TOKENS_SHORT: &str = "the organization has not enough AI tokens";
pub const TOKEN_OVERFLOW: &str =
    "amount would take the token balance past the largest balance an organization holds";
pub const MEMBER_LIMIT: &str = "your personal AI-token limit in this organization is exhausted";
pub const AI_DISABLED: &str = "AI is disabled for you in this organization";

/// Which ledger a move changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Book {
    /// The organization's wallet (minor units of its currency).
    Wallet,
    /// The organization's AI tokens (and, for a spend, the member's usage).
    Tokens,
}

/// One balance change with its audit event (already serialized, so that the
/// event carries the request's trace context).
#[derive(Debug, Clone)]
pub struct Move {
    pub org_id: OrgId,
    pub delta: i64,
    pub kind: &'static str,
    pub note: String,
    pub actor_user_id: UserId,
    /// Token spends only: the member the spend is attributed to (their AI must
    /// be enabled and their personal limit must hold it).
    pub member: Option<UserId>,
    pub event_id: Uuid,
    pub subject: String,
    pub payload: String,
    pub traceparent: Option<String>,
    /// Dropped unapplied if not in a batch by then.
    pub deadline: Instant,
}

/// The longest a batch can take: Postgres cancels it at `batch_timeout`, and
/// the writer gives up on a connection that has not answered a little later.
pub fn batch_limit(batch_timeout: Duration) -> Duration {
    batch_timeout + Duration::from_millis(200) + batch_timeout / 10
}

/// Why a book refused a move: storage's answer, mapped to the client's error
/// at the edge (`From<Refused> for ApiError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The wallet would go below zero.
    BelowZero,
    /// The organization has not enough AI tokens.
    TokensShort,
    /// The wallet's balance would leave the int64 range.
    Overflow,
    /// The token balance would leave the int64 range.
    TokenOverflow,
    /// The member's personal AI-token limit is exhausted.
    MemberLimit,
    /// AI is disabled for the member.
    AiDisabled,
    /// No such organization (or, for spends, not a member).
    NotFound,
    /// An outcome the functions never give (a bug): a 500.
    Unknown(String),
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::BelowZero => ApiError::conflict(BELOW_ZERO),
            Refused::TokensShort => ApiError::PaymentRequired(TOKENS_SHORT.into()),
            Refused::Overflow => ApiError::bad_request(OVERFLOW),
            Refused::TokenOverflow => ApiError::bad_request(TOKEN_OVERFLOW),
            Refused::MemberLimit => ApiError::PaymentRequired(MEMBER_LIMIT.into()),
            Refused::AiDisabled => ApiError::forbidden(AI_DISABLED),
            Refused::NotFound => ApiError::NotFound,
            Refused::Unknown(what) => ApiError::internal(anyhow::anyhow!(what)),
        }
    }
}

/// The balance after an accepted move (`currency` for wallets only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub balance_minor: i64,
    pub currency: Option<String>,
    pub transaction_id: i64,
}

struct Outcome {
    outcome: String,
    balance_after: Option<i64>,
    currency: Option<String>,
    transaction_id: Option<i64>,
}

/// Apply `moves` to `book` in one statement (so in the caller's transaction,
/// or in a transaction of its own): the outcome of each, in order.
pub async fn apply(
    conn: &mut PgConnection,
    book: Book,
    moves: &[Move],
) -> sqlx::Result<Vec<Result<Applied, Refused>>> {
    let orgs: Vec<OrgId> = moves.iter().map(|m| m.org_id).collect();
    let deltas: Vec<i64> = moves.iter().map(|m| m.delta).collect();
    let kinds: Vec<&str> = moves.iter().map(|m| m.kind).collect();
    let notes: Vec<&str> = moves.iter().map(|m| m.note.as_str()).collect();
    let actors: Vec<UserId> = moves.iter().map(|m| m.actor_user_id).collect();
    let events: Vec<Uuid> = moves.iter().map(|m| m.event_id).collect();
    let subjects: Vec<&str> = moves.iter().map(|m| m.subject.as_str()).collect();
    let payloads: Vec<&str> = moves.iter().map(|m| m.payload.as_str()).collect();
    let traceparents: Vec<Option<&str>> = moves.iter().map(|m| m.traceparent.as_deref()).collect();
    // Set-returning plpgsql functions: Postgres cannot say which columns are
    // never NULL; `outcome` always is set (the functions' RETURN QUERY).
    let rows = match book {
        Book::Wallet => {
            sqlx::query_as!(
                Outcome,
                r#"SELECT outcome AS "outcome!", balance_after, currency, transaction_id
                     FROM apply_wallet_moves($1, $2, $3, $4, $5, $6, $7, $8, $9) ORDER BY ord"#,
                &orgs as &[OrgId],
                &deltas,
                &kinds as &[&str],
                &notes as &[&str],
                &actors as &[UserId],
                &events,
                &subjects as &[&str],
                &payloads as &[&str],
                &traceparents as &[Option<&str>],
            )
            .fetch_all(&mut *conn)
            .await?
        }
        Book::Tokens => {
            let members: Vec<Option<UserId>> = moves.iter().map(|m| m.member).collect();
            sqlx::query_as!(
                Outcome,
                r#"SELECT outcome AS "outcome!", balance_after, NULL::text AS currency, transaction_id
                     FROM apply_token_moves($1, $2, $3, $4, $5, $10, $6, $7, $8, $9) ORDER BY ord"#,
                &orgs as &[OrgId],
                &deltas,
                &kinds as &[&str],
                &notes as &[&str],
                &actors as &[UserId],
                &events,
                &subjects as &[&str],
                &payloads as &[&str],
                &traceparents as &[Option<&str>],
                &members as &[Option<UserId>],
            )
            .fetch_all(&mut *conn)
            .await?
        }
    };
    if rows.len() != moves.len() {
        return Err(sqlx::Error::Protocol(format!(
            "{} answered {} rows for {} moves",
            match book {
                Book::Wallet => "apply_wallet_moves",
                Book::Tokens => "apply_token_moves",
            },
            rows.len(),
            moves.len()
        )));
    }
    Ok(rows
        .into_iter()
        .map(|o| {
            match (
                o.outcome.as_str(),
                o.balance_after,
                o.currency,
                o.transaction_id,
            ) {
                ("applied", Some(balance_minor), currency, Some(transaction_id))
                    if currency.is_some() == (book == Book::Wallet) =>
                {
                    Ok(Applied {
                        balance_minor,
                        currency,
                        transaction_id,
                    })
                }
                ("below_zero", ..) if book == Book::Wallet => Err(Refused::BelowZero),
                ("below_zero", ..) => Err(Refused::TokensShort),
                ("overflow", ..) if book == Book::Wallet => Err(Refused::Overflow),
                ("overflow", ..) => Err(Refused::TokenOverflow),
                ("member_limit", ..) => Err(Refused::MemberLimit),
                ("ai_disabled", ..) => Err(Refused::AiDisabled),
                ("not_found", ..) => Err(Refused::NotFound),
                (other, ..) => Err(Refused::Unknown(format!(
                    "{book:?} moves: unexpected outcome {other:?}"
                ))),
            }
        })
        .collect())
}

type Job = (Move, oneshot::Sender<Result<Applied, ApiError>>);

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

impl Book {
    /// The answer to a move dropped or cancelled before it applied.
    fn not_applied(self) -> ApiError {
        ApiError::Unavailable(
            match self {
                Book::Wallet => NOT_APPLIED,
                Book::Tokens => TOKENS_NOT_APPLIED,
            }
            .into(),
        )
    }
}

impl BatchError {
    fn to_api(&self, book: Book) -> ApiError {
        match self {
            // Cancelled by the statement timeout: rolled back, nothing applied.
            BatchError::Db(sqlx::Error::Database(d)) if d.code().as_deref() == Some("57014") => {
                book.not_applied()
            }
            // Postgres could not be reached before anything was sent: not
            // applied (the gateway and the client may retry at once).
            BatchError::Connect(_) => book.not_applied(),
            // The connection broke during the batch: an outage (503 with
            // Retry-After), its outcome unknown (it may have committed), so
            // never retried here; a retry with the same Idempotency-Key is safe.
            BatchError::Db(e) if service_kit::outage::classify_sqlx(e).is_some() => {
                ApiError::Unavailable(OUTCOME_UNKNOWN.into())
            }
            // The connection stopped answering mid-batch: the same.
            BatchError::Hung => ApiError::Unavailable(OUTCOME_UNKNOWN.into()),
            // Outcome unknown (it may have committed): never retried here.
            other => ApiError::internal(anyhow::anyhow!("{book:?} batch failed: {other}")),
        }
    }
}

/// Group commit for the moves of one [`Book`]: `writers` tasks, each owning the
/// organizations whose id falls in its shard, each applying up to `max_batch`
/// waiting moves per transaction.
#[derive(Clone)]
pub struct Writer {
    shards: Arc<[mpsc::Sender<Job>]>,
}

impl Writer {
    /// Start the writer tasks. Each holds one connection of its own (opened with
    /// `db`, reopened after an error), so that a batch costs one round trip and
    /// no pool checkout. They stop when every `Writer` clone is gone (after
    /// finishing what was queued), or at the latest `grace` after `cancel` fires.
    pub fn spawn(
        book: Book,
        db: WriterDb,
        outbox: Outbox,
        writers: usize,
        max_batch: usize,
        cancel: CancellationToken,
        grace: Duration,
    ) -> (Writer, Vec<tokio::task::JoinHandle<()>>) {
        let max_batch = max_batch.max(1);
        let (senders, tasks): (Vec<_>, Vec<_>) = (0..writers.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::channel::<Job>(max_batch * 4);
                let task = tokio::spawn(run(
                    book,
                    db.clone(),
                    outbox.clone(),
                    rx,
                    max_batch,
                    cancel.clone(),
                    grace,
                ));
                (tx, task)
            })
            .unzip();
        (
            Writer {
                shards: senders.into(),
            },
            tasks,
        )
    }

    /// Apply `m` with whatever else is waiting for the same writer; returns once
    /// its transaction committed.
    pub async fn apply(&self, m: Move) -> Result<Applied, ApiError> {
        let shard = (m.org_id.as_uuid().as_u128() % self.shards.len() as u128) as usize;
        let (reply, answer) = oneshot::channel();
        self.shards[shard]
            .send((m, reply))
            .await
            .map_err(|_| ApiError::Unavailable("the service is shutting down".into()))?;
        answer
            .await
            .map_err(|_| ApiError::Unavailable("the service is shutting down".into()))?
    }
}

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

/// The writer's connection for the next batch: the one it holds (pinged first
/// if it sat idle, since Postgres may have gone away meanwhile), else a new one.
async fn ready(
    held: &mut Option<(PgConnection, Instant)>,
    db: &WriterDb,
) -> sqlx::Result<PgConnection> {
    if let Some((mut c, last_used)) = held.take() {
        if last_used.elapsed() < db.ping_if_idle || c.ping().await.is_ok() {
            return Ok(c);
        }
    }
    tokio::time::timeout(db.connect_timeout, PgConnection::connect_with(&db.options))
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)?
}

async fn run(
    book: Book,
    db: WriterDb,
    outbox: Outbox,
    mut rx: mpsc::Receiver<Job>,
    max_batch: usize,
    cancel: CancellationToken,
    grace: Duration,
) {
    let deadline = async {
        cancel.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::pin!(deadline);
    let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
    let mut conn: Option<(PgConnection, Instant)> = None;
    loop {
        tokio::select! {
            n = rx.recv_many(&mut jobs, max_batch) => if n == 0 { return },
            _ = &mut deadline => return,
        }
        // Only moves whose caller still waits and whose deadline has not
        // passed: a move applied after its caller gave up (a gateway 504, a
        // client timeout) would be applied again by the retry.
        let now = Instant::now();
        let (moves, replies): (Vec<Move>, Vec<_>) = jobs
            .drain(..)
            .filter(|(m, reply)| {
                if reply.is_closed() {
                    tracing::info!(org_id = %m.org_id, ?book, "caller gone; move dropped unapplied");
                    false
                } else {
                    true
                }
            })
            .filter_map(|(m, reply)| {
                if m.deadline <= now {
                    let _ = reply.send(Err(book.not_applied()));
                    None
                } else {
                    Some((m, reply))
                }
            })
            .unzip();
        if moves.is_empty() {
            continue;
        }
        let started = Instant::now();
        let connected = ready(&mut conn, &db).await;
        let outcomes = match connected {
            // Postgres cancels the statement at batch_timeout; the rest of
            // batch_limit covers a connection that does not answer at all.
            Ok(mut c) => {
                match tokio::time::timeout(
                    batch_limit(db.batch_timeout),
                    apply(&mut c, book, &moves),
                )
                .await
                {
                    Ok(outcomes) => {
                        // After an error the connection's state is unknown: the
                        // next batch opens a new one.
                        if outcomes.is_ok() {
                            conn = Some((c, Instant::now()));
                        }
                        outcomes.map_err(BatchError::Db).map(|all| {
                            all.into_iter()
                                .map(|o| o.map_err(ApiError::from))
                                .collect::<Vec<_>>()
                        })
                    }
                    Err(_) => Err(BatchError::Hung),
                }
            }
            Err(e) => Err(BatchError::Connect(e)),
        }
        .inspect(|_| {
            tracing::debug!(
                moves = moves.len(),
                elapsed_us = started.elapsed().as_micros() as u64,
                ?book,
                "batch committed"
            )
        })
        .unwrap_or_else(|e| {
            match &e {
                // An outage is logged once per cause and interval.
                BatchError::Connect(d) | BatchError::Db(d)
                    if service_kit::outage::classify_sqlx(d).is_some() =>
                {
                    if let Some(o) = service_kit::outage::classify_sqlx(d) {
                        service_kit::outage::report(&o);
                    }
                }
                _ => tracing::error!(error = %e, moves = moves.len(), ?book, "batch failed"),
            }
            moves.iter().map(|_| Err(e.to_api(book))).collect()
        });
        if outcomes.iter().any(Result::is_ok) {
            outbox.kick();
        }
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // The requester may have gone; the move stands either way.
            let _ = reply.send(outcome);
        }
    }
}
