//! Conversations and their messages (the exchanges themselves are written by
//! [`crate::journal`]).

use hub_domain::{ConversationId, OrgId, StagedActionId, UserId};
use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;

#[derive(Debug, Serialize)]
pub struct Conversation {
    pub id: ConversationId,
    pub summary: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub closed_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

#[derive(Debug, Serialize)]
pub struct Message {
    pub id: i64,
    pub role: String,
    pub content: String,
    pub engine: Option<String>,
    pub tier: Option<String>,
    pub confirmation_id: Option<StagedActionId>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// The user's conversation `id`: None when there is none; else when it was
/// closed (None: open).
pub async fn closed_at(
    pool: &PgPool,
    id: ConversationId,
    user: UserId,
) -> sqlx::Result<Option<Option<OffsetDateTime>>> {
    sqlx::query_scalar!(
        "SELECT closed_at FROM conversations WHERE id = $1 AND user_id = $2",
        id as ConversationId,
        user as UserId,
    )
    .fetch_optional(pool)
    .await
}

/// Is conversation `id` the user's?
pub async fn is_users(pool: &PgPool, id: ConversationId, user: UserId) -> sqlx::Result<bool> {
    let mine: Option<i32> = sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM conversations WHERE id = $1 AND user_id = $2"#,
        id as ConversationId,
        user as UserId,
    )
    .fetch_optional(pool)
    .await?;
    Ok(mine.is_some())
}

/// The last `n` messages of a conversation, oldest first, as (role, content).
pub async fn history(
    pool: &PgPool,
    id: ConversationId,
    n: i64,
) -> sqlx::Result<Vec<(String, String)>> {
    let mut rows: Vec<(String, String)> = sqlx::query!(
        "SELECT role, content FROM messages WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2",
        id as ConversationId,
        n,
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.role, r.content))
    .collect();
    rows.reverse();
    Ok(rows)
}

/// The user's conversations, newest first, at most `limit`.
pub async fn list(pool: &PgPool, user: UserId, limit: i64) -> sqlx::Result<Vec<Conversation>> {
    sqlx::query_as!(
        Conversation,
        r#"SELECT id AS "id: ConversationId", summary, closed_at, created_at FROM conversations
           WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"#,
        user as UserId,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// A conversation's messages, oldest first.
pub async fn messages(pool: &PgPool, id: ConversationId) -> sqlx::Result<Vec<Message>> {
    sqlx::query_as!(
        Message,
        r#"SELECT id, role, content, engine, tier,
             confirmation_id AS "confirmation_id: StagedActionId", created_at
           FROM messages WHERE conversation_id = $1 ORDER BY id"#,
        id as ConversationId,
    )
    .fetch_all(pool)
    .await
}

/// Close the user's conversation `id` if it is open; false otherwise.
pub async fn claim_close(
    pool: &PgPool,
    id: ConversationId,
    user: UserId,
    now: OffsetDateTime,
) -> sqlx::Result<bool> {
    let claimed: Option<ConversationId> = sqlx::query_scalar!(
        r#"UPDATE conversations SET closed_at = $3 WHERE id = $1 AND user_id = $2 AND closed_at IS NULL
           RETURNING id AS "id: ConversationId""#,
        id as ConversationId,
        user as UserId,
        now,
    )
    .fetch_optional(pool)
    .await?;
    Ok(claimed.is_some())
}

/// How many messages of the conversation are the user's requests.
pub async fn request_count(pool: &PgPool, id: ConversationId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM messages WHERE conversation_id = $1 AND role = 'user'"#,
        id as ConversationId,
    )
    .fetch_one(pool)
    .await
}

/// The user's first `n` requests in the conversation.
pub async fn first_requests(
    pool: &PgPool,
    id: ConversationId,
    n: i64,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        "SELECT content FROM messages WHERE conversation_id = $1 AND role = 'user' ORDER BY id LIMIT $2",
        id as ConversationId,
        n,
    )
    .fetch_all(pool)
    .await
}

/// The latest `n` messages, newest first, as (role, content) with each content
/// cut to `chars` characters.
pub async fn latest_cut(
    pool: &PgPool,
    id: ConversationId,
    n: i64,
    chars: i32,
) -> sqlx::Result<Vec<(String, String)>> {
    Ok(sqlx::query!(
        r#"SELECT role, left(content, $3) AS "content!" FROM messages
            WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2"#,
        id as ConversationId,
        n,
        chars,
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.role, r.content))
    .collect())
}

/// Store the conversation's summary.
pub async fn set_summary(
    pool: &PgPool,
    id: ConversationId,
    summary: &str,
) -> sqlx::Result<Conversation> {
    sqlx::query_as!(
        Conversation,
        r#"UPDATE conversations SET summary = $2 WHERE id = $1
           RETURNING id AS "id: ConversationId", summary, closed_at, created_at"#,
        id as ConversationId,
        summary,
    )
    .fetch_one(pool)
    .await
}

/// The organization that paid for the conversation's latest model-written
/// reply.
pub async fn last_payer(pool: &PgPool, id: ConversationId) -> sqlx::Result<Option<OrgId>> {
    sqlx::query_scalar!(
        r#"SELECT org_id AS "org_id!: OrgId" FROM messages WHERE conversation_id = $1 AND org_id IS NOT NULL ORDER BY id DESC LIMIT 1"#,
        id as ConversationId,
    )
    .fetch_optional(pool)
    .await
}
