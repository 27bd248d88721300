//! Group commit for exchanges (a user's message, the reply, and the staged
//! action it prepared): every answer is stored before it is sent, and storing
//! each in a transaction of its own would make the commit the cost of every
//! answer. `agent.journal_writers` tasks each take the exchanges waiting at that
//! moment (up to `agent.journal_batch`) and store them in one transaction: the
//! open-conversation check for continued conversations, then one multi-row
//! INSERT each for new conversations, staged actions and messages. An exchange
//! is answered only after the commit that holds it; one whose conversation was
//! closed meanwhile is refused (409) without affecting the others. Exchanges of
//! one user go to one writer, so their order is kept. The writers are the
//! kit's group commit ([`service_kit::group_commit`]).

use crate::ops::{Staged, Tier};
use hub_domain::{ConversationId, OrgId, StagedActionId, UserId};
use service_kit::{
    group_commit::{Batch, GroupCommit, Shape},
    metrics::CommitMetrics,
    ApiError,
};
use sqlx::PgPool;
use std::collections::HashSet;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

pub const CLOSED: &str = "this conversation is closed; start a new one";

/// One exchange to store.
#[derive(Debug)]
pub struct Exchange {
    pub user_id: UserId,
    /// The conversation to continue; None starts `new_conversation`.
    pub continues: Option<ConversationId>,
    pub new_conversation: ConversationId,
    pub message: String,
    pub reply: String,
    pub engine: String,
    pub tier: Tier,
    /// The staged action and its confirmation id and expiry.
    pub staged: Option<(StagedActionId, Staged, OffsetDateTime)>,
    /// The organization whose AI tokens paid for a model-written reply.
    pub paid_by: Option<OrgId>,
    pub at: OffsetDateTime,
}

impl Exchange {
    pub fn conversation_id(&self) -> ConversationId {
        self.continues.unwrap_or(self.new_conversation)
    }
}

/// The exchanges' writers: submit with [`Journal::record`].
#[derive(Clone)]
pub struct Journal(GroupCommit<Exchanges>);

impl Journal {
    /// Start the writers; they stop when every `Journal` clone is gone (after
    /// storing what was queued), or when `cancel` fires.
    pub fn spawn(
        pool: PgPool,
        writers: usize,
        max_batch: usize,
        cancel: CancellationToken,
        metrics: CommitMetrics,
    ) -> (Journal, Vec<tokio::task::JoinHandle<()>>) {
        let shape = Shape {
            writers,
            max_batch,
            grace: std::time::Duration::ZERO,
        };
        let (w, tasks) =
            GroupCommit::spawn(shape, cancel, metrics, || Exchanges { pool: pool.clone() });
        (Journal(w), tasks)
    }

    /// Store `e` with whatever else is waiting; returns once committed.
    pub async fn record(&self, e: Exchange) -> Result<(), ApiError> {
        self.0.submit(e.user_id.as_uuid().as_u128(), e).await?
    }
}

/// One writer's batch of exchanges.
pub struct Exchanges {
    pool: PgPool,
}

impl Batch for Exchanges {
    type Item = Exchange;
    type Output = Result<(), ApiError>;
    /// An exchange whose requester went away is stored all the same: the
    /// conversation holds what was said.
    const DROP_ABANDONED: bool = false;

    fn name(&self) -> &'static str {
        "agent-journal"
    }

    async fn apply(&mut self, batch: &[Exchange]) -> Vec<Self::Output> {
        match store(&self.pool, batch).await {
            Ok(open) => open
                .into_iter()
                .map(|ok| {
                    if ok {
                        Ok(())
                    } else {
                        Err(ApiError::conflict(CLOSED))
                    }
                })
                .collect(),
            Err(err) => {
                tracing::error!(error = %err, exchanges = batch.len(), "storing exchanges failed");
                batch
                    .iter()
                    .map(|_| {
                        Err(ApiError::internal(anyhow::anyhow!(
                            "storing the exchange failed"
                        )))
                    })
                    .collect()
            }
        }
    }
}

/// Store the batch in one transaction; for each exchange, whether it was
/// stored (false: its conversation is not open, or not its user's).
async fn store(pool: &PgPool, batch: &[Exchange]) -> sqlx::Result<Vec<bool>> {
    let mut tx = pool.begin().await?;
    let continued: Vec<(ConversationId, UserId)> = batch
        .iter()
        .filter_map(|e| e.continues.map(|c| (c, e.user_id)))
        .collect();
    let open: HashSet<ConversationId> = if continued.is_empty() {
        HashSet::new()
    } else {
        // FOR SHARE: a concurrent close waits for this commit (and then its
        // summary sees these messages).
        sqlx::query_scalar!(
            r#"SELECT c.id AS "id: ConversationId" FROM conversations c
             JOIN unnest($1::uuid[], $2::uuid[]) AS w(id, user_id) ON c.id = w.id AND c.user_id = w.user_id
             WHERE c.closed_at IS NULL FOR SHARE OF c"#,
            &continued.iter().map(|(c, _)| *c).collect::<Vec<_>>() as &[ConversationId],
            &continued.iter().map(|(_, u)| *u).collect::<Vec<_>>() as &[UserId],
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect()
    };
    let keep: Vec<bool> = batch
        .iter()
        .map(|e| e.continues.is_none_or(|c| open.contains(&c)))
        .collect();
    let kept: Vec<&Exchange> = batch
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(e, _)| e)
        .collect();
    let new: Vec<&&Exchange> = kept.iter().filter(|e| e.continues.is_none()).collect();
    if !new.is_empty() {
        sqlx::query!(
            "INSERT INTO conversations (id, user_id, created_at) \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[])",
            &new.iter().map(|e| e.new_conversation).collect::<Vec<_>>() as &[ConversationId],
            &new.iter().map(|e| e.user_id).collect::<Vec<_>>() as &[UserId],
            &new.iter().map(|e| e.at).collect::<Vec<_>>(),
        )
        .execute(&mut *tx)
        .await?;
    }
    let staged: Vec<(&Exchange, &(StagedActionId, Staged, OffsetDateTime))> = kept
        .iter()
        .filter_map(|e| e.staged.as_ref().map(|s| (*e, s)))
        .collect();
    if !staged.is_empty() {
        sqlx::query!(
            "INSERT INTO staged_actions (id, user_id, conversation_id, kind, args, summary, created_at, expires_at) \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::jsonb[], $6::text[], \
                                  $7::timestamptz[], $8::timestamptz[])",
            &staged.iter().map(|(_, s)| s.0).collect::<Vec<_>>() as &[StagedActionId],
            &staged.iter().map(|(e, _)| e.user_id).collect::<Vec<_>>() as &[UserId],
            &staged.iter().map(|(e, _)| e.conversation_id()).collect::<Vec<_>>() as &[ConversationId],
            &staged.iter().map(|(_, s)| s.1.kind.as_str().to_owned()).collect::<Vec<_>>(),
            &staged.iter().map(|(_, s)| s.1.args.clone()).collect::<Vec<_>>(),
            &staged.iter().map(|(_, s)| s.1.summary.clone()).collect::<Vec<_>>(),
            &staged.iter().map(|(e, _)| e.at).collect::<Vec<_>>(),
            &staged.iter().map(|(_, s)| s.2).collect::<Vec<_>>(),
        )
        .execute(&mut *tx)
        .await?;
    }
    if !kept.is_empty() {
        // Two rows per exchange, the user's first: ids keep their order.
        let mut conv = Vec::with_capacity(kept.len() * 2);
        let mut role = Vec::with_capacity(kept.len() * 2);
        let mut content = Vec::with_capacity(kept.len() * 2);
        let mut engine: Vec<Option<&str>> = Vec::with_capacity(kept.len() * 2);
        let mut tier: Vec<Option<&str>> = Vec::with_capacity(kept.len() * 2);
        let mut confirmation: Vec<Option<StagedActionId>> = Vec::with_capacity(kept.len() * 2);
        let mut paid_by: Vec<Option<OrgId>> = Vec::with_capacity(kept.len() * 2);
        let mut at = Vec::with_capacity(kept.len() * 2);
        for e in &kept {
            conv.extend([e.conversation_id(); 2]);
            role.extend(["user", "assistant"]);
            content.extend([e.message.as_str(), e.reply.as_str()]);
            engine.extend([None, Some(e.engine.as_str())]);
            tier.extend([None, Some(e.tier.as_str())]);
            confirmation.extend([None, e.staged.as_ref().map(|s| s.0)]);
            paid_by.extend([None, e.paid_by]);
            at.extend([e.at; 2]);
        }
        sqlx::query!(
            "INSERT INTO messages (conversation_id, role, content, engine, tier, confirmation_id, created_at, org_id) \
             SELECT c, r, t, e, ti, ci, a, o FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], \
                                  $6::uuid[], $7::timestamptz[], $8::uuid[]) WITH ORDINALITY AS m(c, r, t, e, ti, ci, a, o, n) ORDER BY n",
            &conv as &[ConversationId],
            &role as &[&str],
            &content as &[&str],
            &engine as &[Option<&str>],
            &tier as &[Option<&str>],
            &confirmation as &[Option<StagedActionId>],
            &at,
            &paid_by as &[Option<OrgId>],
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(keep)
}
