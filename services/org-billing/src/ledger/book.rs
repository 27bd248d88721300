//! The one mechanism both ledgers share: a [`Book`] (the wallet's, the AI
//! tokens'), its moves, what a move is refused for, and the batched apply
//! (`apply_wallet_moves`, `apply_token_moves` in Postgres).

use hub_domain::{Currency, MinorUnits, OrgId, UserId};
use service_kit::ApiError;
use sqlx::PgConnection;
use std::{future::Future, time::Duration, time::Instant};
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

/// What a ledger row records (its `kind` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A wallet credit: money received by bank transfer.
    BankTransfer,
    /// A negative wallet move by staff.
    Correction,
    /// A payment's part not applied to an invoice (an overpayment, or an
    /// unallocated payment), credited to the wallet.
    Payment,
    /// An invoice paid from the wallet (negative).
    InvoicePayment,
    /// AI tokens granted by staff.
    Grant,
    /// AI tokens spent by a member (through the agent).
    Spend,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::BankTransfer => "bank_transfer",
            EntryKind::Correction => "correction",
            EntryKind::Payment => "payment",
            EntryKind::InvoicePayment => "invoice_payment",
            EntryKind::Grant => "grant",
            EntryKind::Spend => "spend",
        }
    }
}

/// One balance change with its audit event (already serialized, so that the
/// event carries the request's trace context).
#[derive(Debug, Clone)]
pub struct Move {
    pub org_id: OrgId,
    pub delta: i64,
    pub kind: EntryKind,
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

/// One row of a book's batch function: the outcome of one move.
pub struct Outcome {
    outcome: String,
    balance_after: Option<i64>,
    currency: Option<String>,
    transaction_id: Option<i64>,
}

/// A ledger: its batch function in Postgres, what an accepted move answers,
/// and how its refusals read.
pub trait Book: Send + Sync + 'static {
    /// Its batch function (for errors and logs).
    const FUNCTION: &'static str;
    /// A move that would take the balance below zero.
    const SHORT: Refused;
    /// A move that would take the balance past int64.
    const OVERFLOW: Refused;
    /// The answer to a move dropped or cancelled before it applied (503).
    const NOT_APPLIED: &'static str;
    /// The balance after an accepted move.
    type Applied: Send + 'static;

    /// Run the batch function on `moves`: one row per move, in order.
    fn rows(
        conn: &mut PgConnection,
        moves: &[Move],
    ) -> impl Future<Output = sqlx::Result<Vec<Outcome>>> + Send;

    /// An `applied` row as this book's answer (None: the row is malformed).
    fn applied(o: Outcome) -> Option<Self::Applied>;
}

/// The organization's wallet (minor units of its currency).
pub struct Wallet;

/// The wallet after an accepted move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletBalance {
    pub balance_minor: MinorUnits,
    pub currency: Currency,
    pub transaction_id: i64,
}

/// The organization's AI tokens (and, for a spend, the member's usage).
pub struct Tokens;

/// The token balance after an accepted move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBalance {
    pub balance: i64,
    pub transaction_id: i64,
}

/// The moves as the batch functions take them: parallel arrays.
struct Columns<'a> {
    orgs: Vec<OrgId>,
    deltas: Vec<i64>,
    kinds: Vec<&'a str>,
    notes: Vec<&'a str>,
    actors: Vec<UserId>,
    events: Vec<Uuid>,
    subjects: Vec<&'a str>,
    payloads: Vec<&'a str>,
    traceparents: Vec<Option<&'a str>>,
}

impl<'a> Columns<'a> {
    fn of(moves: &'a [Move]) -> Columns<'a> {
        Columns {
            orgs: moves.iter().map(|m| m.org_id).collect(),
            deltas: moves.iter().map(|m| m.delta).collect(),
            kinds: moves.iter().map(|m| m.kind.as_str()).collect(),
            notes: moves.iter().map(|m| m.note.as_str()).collect(),
            actors: moves.iter().map(|m| m.actor_user_id).collect(),
            events: moves.iter().map(|m| m.event_id).collect(),
            subjects: moves.iter().map(|m| m.subject.as_str()).collect(),
            payloads: moves.iter().map(|m| m.payload.as_str()).collect(),
            traceparents: moves.iter().map(|m| m.traceparent.as_deref()).collect(),
        }
    }
}

// Set-returning plpgsql functions: Postgres cannot say which columns are
// never NULL; `outcome` always is set (the functions' RETURN QUERY).
impl Book for Wallet {
    const FUNCTION: &'static str = "apply_wallet_moves";
    const SHORT: Refused = Refused::BelowZero;
    const OVERFLOW: Refused = Refused::Overflow;
    const NOT_APPLIED: &'static str = NOT_APPLIED;
    type Applied = WalletBalance;

    async fn rows(conn: &mut PgConnection, moves: &[Move]) -> sqlx::Result<Vec<Outcome>> {
        let c = Columns::of(moves);
        sqlx::query_as!(
            Outcome,
            r#"SELECT outcome AS "outcome!", balance_after, currency, transaction_id
                 FROM apply_wallet_moves($1, $2, $3, $4, $5, $6, $7, $8, $9) ORDER BY ord"#,
            &c.orgs as &[OrgId],
            &c.deltas,
            &c.kinds as &[&str],
            &c.notes as &[&str],
            &c.actors as &[UserId],
            &c.events,
            &c.subjects as &[&str],
            &c.payloads as &[&str],
            &c.traceparents as &[Option<&str>],
        )
        .fetch_all(&mut *conn)
        .await
    }

    fn applied(o: Outcome) -> Option<WalletBalance> {
        Some(WalletBalance {
            balance_minor: MinorUnits(o.balance_after?),
            currency: Currency::parse(o.currency.as_deref()?)?,
            transaction_id: o.transaction_id?,
        })
    }
}

impl Book for Tokens {
    const FUNCTION: &'static str = "apply_token_moves";
    const SHORT: Refused = Refused::TokensShort;
    const OVERFLOW: Refused = Refused::TokenOverflow;
    const NOT_APPLIED: &'static str = TOKENS_NOT_APPLIED;
    type Applied = TokenBalance;

    async fn rows(conn: &mut PgConnection, moves: &[Move]) -> sqlx::Result<Vec<Outcome>> {
        let c = Columns::of(moves);
        let members: Vec<Option<UserId>> = moves.iter().map(|m| m.member).collect();
        sqlx::query_as!(
            Outcome,
            r#"SELECT outcome AS "outcome!", balance_after, NULL::text AS currency, transaction_id
                 FROM apply_token_moves($1, $2, $3, $4, $5, $10, $6, $7, $8, $9) ORDER BY ord"#,
            &c.orgs as &[OrgId],
            &c.deltas,
            &c.kinds as &[&str],
            &c.notes as &[&str],
            &c.actors as &[UserId],
            &c.events,
            &c.subjects as &[&str],
            &c.payloads as &[&str],
            &c.traceparents as &[Option<&str>],
            &members as &[Option<UserId>],
        )
        .fetch_all(&mut *conn)
        .await
    }

    fn applied(o: Outcome) -> Option<TokenBalance> {
        // A token row never carries a currency.
        if o.currency.is_some() {
            return None;
        }
        Some(TokenBalance {
            balance: o.balance_after?,
            transaction_id: o.transaction_id?,
        })
    }
}

/// Apply `moves` to book `B` in one statement (so in the caller's transaction,
/// or in a transaction of its own): the outcome of each, in order.
pub async fn apply<B: Book>(
    conn: &mut PgConnection,
    moves: &[Move],
) -> sqlx::Result<Vec<Result<B::Applied, Refused>>> {
    let rows = B::rows(conn, moves).await?;
    if rows.len() != moves.len() {
        return Err(sqlx::Error::Protocol(format!(
            "{} answered {} rows for {} moves",
            B::FUNCTION,
            rows.len(),
            moves.len()
        )));
    }
    Ok(rows
        .into_iter()
        .map(|o| match o.outcome.as_str() {
            "applied" => B::applied(o).ok_or_else(|| {
                Refused::Unknown(format!("{}: a malformed applied row", B::FUNCTION))
            }),
            "below_zero" => Err(B::SHORT),
            "overflow" => Err(B::OVERFLOW),
            "member_limit" => Err(Refused::MemberLimit),
            "ai_disabled" => Err(Refused::AiDisabled),
            "not_found" => Err(Refused::NotFound),
            other => Err(Refused::Unknown(format!(
                "{}: unexpected outcome {other:?}",
                B::FUNCTION
            ))),
        })
        .collect())
}

/// Apply one move in the caller's transaction (the Idempotency-Key path).
pub async fn apply_one<B: Book>(
    conn: &mut PgConnection,
    m: &Move,
) -> Result<Result<B::Applied, Refused>, ApiError> {
    apply::<B>(conn, std::slice::from_ref(m))
        .await?
        .pop()
        // One row per move (or `apply` failed): never empty.
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("{} answered no row", B::FUNCTION)))
}
