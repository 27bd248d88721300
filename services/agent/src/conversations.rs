//! Conversations: every message belongs to one (created on the first message).
//! A conversation, its messages and its staged actions belong to the user who
//! started it: anyone else gets 404.
//!
//! - `GET /v1/agent/conversations`: the caller's, newest first (at most 100).
//! - `GET /v1/agent/conversations/{id}/messages`: its messages, oldest first.
//! - `POST /v1/agent/conversations/{id}/close`: closes it and writes its
//!   summary, at most 150 words: model-written when a provider is configured
//!   and answers, otherwise extractive (the user's own requests, in order).
//!   Closing twice is a 409; a closed conversation takes no more messages.

use crate::{
    journal::Exchange,
    model,
    state::AppState,
    tools::{Staged, Tier},
};
use serde::Serialize;
use service_kit::{assertion::Caller, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

pub const SUMMARY_MAX_WORDS: usize = 150;
pub const LIST_LIMIT: i64 = 100;

#[derive(Debug, Serialize, sqlx::FromRow)]
pub struct Conversation {
    pub id: Uuid,
    pub summary: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub closed_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

#[derive(Debug, Serialize, sqlx::FromRow)]
pub struct Message {
    pub id: i64,
    pub role: String,
    pub content: String,
    pub engine: Option<String>,
    pub tier: Option<String>,
    pub confirmation_id: Option<Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// 404 unless the conversation is the caller's; 409 when it is closed.
pub async fn require_open(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let closed: Option<Option<OffsetDateTime>> =
        sqlx::query_scalar("SELECT closed_at FROM conversations WHERE id = $1 AND user_id = $2")
            .bind(id)
            .bind(caller.user_id())
            .fetch_optional(&state.pool)
            .await?;
    match closed {
        None => Err(ApiError::NotFound),
        Some(Some(_)) => Err(ApiError::conflict(
            "this conversation is closed; start a new one",
        )),
        Some(None) => Ok(()),
    }
}

/// The last `n` messages of a conversation, oldest first, as (role, content).
pub async fn history(state: &AppState, id: Uuid, n: i64) -> sqlx::Result<Vec<(String, String)>> {
    let mut rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT role, content FROM messages WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(id)
    .bind(n)
    .fetch_all(&state.pool)
    .await?;
    rows.reverse();
    Ok(rows)
}

pub struct Saved {
    pub conversation_id: Uuid,
    pub confirmation_id: Option<Uuid>,
}

/// Store one exchange (through the group commit of [`crate::journal`]): the
/// conversation (when new), the staged action (if any) and both messages.
#[allow(clippy::too_many_arguments)]
pub async fn record_exchange(
    state: &AppState,
    caller: &Caller,
    conversation: Option<Uuid>,
    message: &str,
    reply: &str,
    engine: &str,
    tier: Tier,
    staged: Option<&Staged>,
) -> ApiResult<Saved> {
    let now = state.clock.now();
    let staged = staged.map(|s| {
        (
            Uuid::new_v4(),
            s.clone(),
            now + time::Duration::seconds(state.agent.confirm_ttl_secs),
        )
    });
    let confirmation_id = staged.as_ref().map(|s| s.0);
    let e = Exchange {
        user_id: caller.user_id().as_uuid(),
        continues: conversation,
        new_conversation: Uuid::now_v7(),
        message: message.to_owned(),
        reply: reply.to_owned(),
        engine: engine.to_owned(),
        tier,
        staged,
        at: now,
    };
    let conversation_id = e.conversation_id();
    state.journal.record(e).await?;
    Ok(Saved {
        conversation_id,
        confirmation_id,
    })
}

pub async fn list(state: &AppState, caller: &Caller) -> ApiResult<Vec<Conversation>> {
    Ok(sqlx::query_as(
        "SELECT id, summary, closed_at, created_at FROM conversations WHERE user_id = $1 \
         ORDER BY created_at DESC, id DESC LIMIT $2",
    )
    .bind(caller.user_id())
    .bind(LIST_LIMIT)
    .fetch_all(&state.pool)
    .await?)
}

pub async fn messages(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Vec<Message>> {
    let mine: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM conversations WHERE id = $1 AND user_id = $2")
            .bind(id)
            .bind(caller.user_id())
            .fetch_optional(&state.pool)
            .await?;
    mine.ok_or(ApiError::NotFound)?;
    Ok(sqlx::query_as(
        "SELECT id, role, content, engine, tier, confirmation_id, created_at FROM messages \
         WHERE conversation_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(&state.pool)
    .await?)
}

/// At most `max` words of `text` (whitespace-separated), joined by spaces.
pub fn clamp_words(text: &str, max: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= max {
        return words.join(" ");
    }
    let mut s = words[..max].join(" ");
    s.push('…');
    s
}

/// The extractive summary: the user's requests in order, clamped.
pub fn extractive(user_messages: &[String]) -> String {
    if user_messages.is_empty() {
        return "An empty conversation.".into();
    }
    let asked: Vec<String> = user_messages
        .iter()
        .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    clamp_words(
        &format!(
            "{} request{}: {}",
            asked.len(),
            if asked.len() == 1 { "" } else { "s" },
            asked.join(" | ")
        ),
        SUMMARY_MAX_WORDS,
    )
}

/// Close a conversation of the caller's and write its summary.
pub async fn close(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Conversation> {
    // Claim it first (a concurrent close gets 409), summarize, then store.
    let now = state.clock.now();
    let claimed: Option<Uuid> = sqlx::query_scalar(
        "UPDATE conversations SET closed_at = $3 WHERE id = $1 AND user_id = $2 AND closed_at IS NULL RETURNING id",
    )
    .bind(id)
    .bind(caller.user_id())
    .bind(now)
    .fetch_optional(&state.pool)
    .await?;
    if claimed.is_none() {
        let exists: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM conversations WHERE id = $1 AND user_id = $2")
                .bind(id)
                .bind(caller.user_id())
                .fetch_optional(&state.pool)
                .await?;
        return Err(match exists {
            None => ApiError::NotFound,
            Some(_) => ApiError::conflict("this conversation is already closed"),
        });
    }
    let all: Vec<(String, String)> =
        sqlx::query_as("SELECT role, content FROM messages WHERE conversation_id = $1 ORDER BY id")
            .bind(id)
            .fetch_all(&state.pool)
            .await?;
    let user_messages: Vec<String> = all
        .iter()
        .filter(|(r, _)| r == "user")
        .map(|(_, c)| c.clone())
        .collect();
    let summary = match ai_summary(state, &all).await {
        Some(s) => clamp_words(&s, SUMMARY_MAX_WORDS),
        None => extractive(&user_messages),
    };
    Ok(sqlx::query_as(
        "UPDATE conversations SET summary = $2 WHERE id = $1 RETURNING id, summary, closed_at, created_at",
    )
    .bind(id)
    .bind(summary)
    .fetch_one(&state.pool)
    .await?)
}

/// The model's summary, if a provider is configured and answers.
async fn ai_summary(state: &AppState, all: &[(String, String)]) -> Option<String> {
    if all.is_empty() {
        return None;
    }
    let transcript: Vec<String> = all.iter().map(|(r, c)| format!("{r}: {c}")).collect();
    let instruction = format!(
        "Summarize this conversation between a user and the hub's assistant in at most {SUMMARY_MAX_WORDS} words. Plain text."
    );
    model::write(
        state,
        "conversation summary",
        &instruction,
        &transcript.join("\n"),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_never_pass_150_words() {
        let long: Vec<String> = (0..40)
            .map(|i| format!("message {i} with some words"))
            .collect();
        let s = extractive(&long);
        assert!(s.split_whitespace().count() <= SUMMARY_MAX_WORDS, "{s}");
        assert!(s.starts_with("40 requests: message 0"));
        assert_eq!(clamp_words("a b  c", 2), "a b…");
        assert_eq!(clamp_words("a b", 2), "a b");
        assert_eq!(extractive(&[]), "An empty conversation.");
    }
}
