//! A user's own data in the agent: their part of the personal-data export
//! (`GET /v1/auth/me/export`, merged by the gateway with identity's) and its
//! erasure when they delete their account (`core.v1.identity.user_deleted`).

use super::{
    conversations::Message,
    memory::MemoryDoc,
    proposals::{Proposal, ProposalStatus},
};
use hub_domain::{ConversationId, ProposalId, StagedActionId, UserId};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;
use time::OffsetDateTime;

/// Most conversations an export lists (newest first), each with every message.
pub const EXPORT_CONVERSATIONS: i64 = 1_000;

#[derive(Serialize)]
pub struct Conversation {
    pub id: ConversationId,
    pub summary: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub closed_at: Option<OffsetDateTime>,
    pub messages: Vec<Message>,
}

#[derive(Serialize)]
pub struct StagedAction {
    pub id: StagedActionId,
    pub conversation_id: ConversationId,
    pub kind: String,
    pub summary: String,
    pub args: Value,
    pub status: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub decided_at: Option<OffsetDateTime>,
}

/// The agent's part of a user's export.
#[derive(Serialize)]
pub struct Export {
    /// Their memory document (null until the assistant kept one).
    pub memory: Option<MemoryDoc>,
    /// Newest first, at most [`EXPORT_CONVERSATIONS`].
    pub conversations: Vec<Conversation>,
    pub staged_actions: Vec<StagedAction>,
    pub proposals: Vec<Proposal>,
}

/// `user`'s export (one snapshot).
pub async fn export(pool: &PgPool, user: UserId) -> sqlx::Result<Export> {
    let mut tx = pool.begin().await?;
    sqlx::query!("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let memory = sqlx::query_as!(
        MemoryDoc,
        "SELECT soul_md, memory_md, last_curated_at, curation_count FROM memory_docs WHERE user_id = $1",
        user as UserId,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let convs = sqlx::query!(
        r#"SELECT id AS "id: ConversationId", summary, created_at, closed_at FROM conversations
            WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"#,
        user as UserId,
        EXPORT_CONVERSATIONS,
    )
    .fetch_all(&mut *tx)
    .await?;
    let ids: Vec<ConversationId> = convs.iter().map(|c| c.id).collect();
    let mut messages = sqlx::query!(
        r#"SELECT conversation_id AS "conversation_id: ConversationId", id, role, content, engine,
                  tier, confirmation_id AS "confirmation_id: StagedActionId", created_at
             FROM messages WHERE conversation_id = ANY($1) ORDER BY conversation_id, id"#,
        &ids as &[ConversationId],
    )
    .fetch_all(&mut *tx)
    .await?;
    // Hand each conversation its own messages (in order).
    let mut by_conversation: std::collections::HashMap<ConversationId, Vec<Message>> =
        std::collections::HashMap::new();
    for m in messages.drain(..) {
        by_conversation
            .entry(m.conversation_id)
            .or_default()
            .push(Message {
                id: m.id,
                role: m.role,
                content: m.content,
                engine: m.engine,
                tier: m.tier,
                confirmation_id: m.confirmation_id,
                created_at: m.created_at,
            });
    }
    let conversations = convs
        .into_iter()
        .map(|c| Conversation {
            messages: by_conversation.remove(&c.id).unwrap_or_default(),
            id: c.id,
            summary: c.summary,
            created_at: c.created_at,
            closed_at: c.closed_at,
        })
        .collect();
    let staged_actions = sqlx::query_as!(
        StagedAction,
        r#"SELECT id AS "id: StagedActionId", conversation_id AS "conversation_id: ConversationId",
                  kind, summary, args, status, created_at, decided_at
             FROM staged_actions WHERE user_id = $1 ORDER BY created_at DESC, id DESC"#,
        user as UserId,
    )
    .fetch_all(&mut *tx)
    .await?;
    let proposals = sqlx::query_as!(
        Proposal,
        r#"SELECT id AS "id: ProposalId", title, problem, proposal,
                  status AS "status: ProposalStatus", created_at, NULL::uuid AS "user_id?: UserId"
             FROM proposals WHERE user_id = $1 ORDER BY created_at DESC, id DESC"#,
        user as UserId,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Export {
        memory,
        conversations,
        staged_actions,
        proposals,
    })
}

/// Erase what the agent holds of `user` as a person: their memory, activity,
/// conversations with every message, and staged actions. Proposals stay (they
/// were addressed to the platform), under the now pseudonymous id; their
/// audit events arriving later are not stored (`erased_users`). Repeating
/// it is a no-op. Returns the conversations erased.
pub async fn erase(pool: &PgPool, user: UserId) -> sqlx::Result<u64> {
    let mut tx = pool.begin().await?;
    // Wait for the writers in flight (see [`super::erasure::ERASURE_LOCK`]).
    sqlx::query!(
        "SELECT pg_advisory_xact_lock($1)",
        super::erasure::ERASURE_LOCK
    )
    .execute(&mut *tx)
    .await?;
    // First, so that activity arriving from now on is not stored again.
    sqlx::query!(
        "INSERT INTO erased_users (user_id) VALUES ($1) ON CONFLICT DO NOTHING",
        user as UserId,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "DELETE FROM messages WHERE conversation_id IN (SELECT id FROM conversations WHERE user_id = $1)",
        user as UserId,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "DELETE FROM staged_actions WHERE user_id = $1",
        user as UserId
    )
    .execute(&mut *tx)
    .await?;
    let conversations = sqlx::query!(
        "DELETE FROM conversations WHERE user_id = $1",
        user as UserId
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query!("DELETE FROM memory_docs WHERE user_id = $1", user as UserId)
        .execute(&mut *tx)
        .await?;
    sqlx::query!("DELETE FROM activity WHERE user_id = $1", user as UserId)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(conversations)
}
