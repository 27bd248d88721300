//! Conversations: every message belongs to one (created on the first message).
//! A conversation, its messages and its staged actions belong to the user who
//! started it: anyone else gets 404.
//!
//! - `GET /v1/agent/conversations`: the caller's, newest first (at most 100).
//! - `GET /v1/agent/conversations/{id}/messages`: its messages, oldest first.
//! - `POST /v1/agent/conversations/{id}/close`: closes it and writes its
//!   summary, at most 150 words: model-written when a provider is configured,
//!   an organization pays for it (see [`close`]) and the model answers,
//!   otherwise extractive (the user's own requests, in order). The model gets
//!   the latest messages, at most `agent.summary_input_chars` characters.
//!   Closing twice is a 409; a closed conversation takes no more messages.

use crate::{
    billing,
    journal::Exchange,
    model,
    ops::{Staged, Tier},
    state::AppState,
};
use hub_domain::{OrgId, UserId};
use serde::Serialize;
use service_kit::{assertion::Caller, ApiError, ApiResult};
use time::OffsetDateTime;
use uuid::Uuid;

pub const SUMMARY_MAX_WORDS: usize = 150;
pub const LIST_LIMIT: i64 = 100;

#[derive(Debug, Serialize)]
pub struct Conversation {
    pub id: Uuid,
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
    pub confirmation_id: Option<Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// 404 unless the conversation is the caller's; 409 when it is closed.
pub async fn require_open(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<()> {
    let closed: Option<Option<OffsetDateTime>> = sqlx::query_scalar!(
        "SELECT closed_at FROM conversations WHERE id = $1 AND user_id = $2",
        id,
        caller.user_id() as UserId,
    )
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
    let mut rows: Vec<(String, String)> = sqlx::query!(
        "SELECT role, content FROM messages WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2",
        id,
        n,
    )
    .fetch_all(&state.pool)
    .await?
    .into_iter()
    .map(|r| (r.role, r.content))
    .collect();
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
    paid_by: Option<OrgId>,
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
        paid_by: paid_by.map(|o| o.as_uuid()),
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
    Ok(sqlx::query_as!(
        Conversation,
        "SELECT id, summary, closed_at, created_at FROM conversations WHERE user_id = $1 \
         ORDER BY created_at DESC, id DESC LIMIT $2",
        caller.user_id() as UserId,
        LIST_LIMIT,
    )
    .fetch_all(&state.pool)
    .await?)
}

pub async fn messages(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Vec<Message>> {
    let mine: Option<i32> = sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM conversations WHERE id = $1 AND user_id = $2"#,
        id,
        caller.user_id() as UserId,
    )
    .fetch_optional(&state.pool)
    .await?;
    mine.ok_or(ApiError::NotFound)?;
    Ok(sqlx::query_as!(
        Message,
        "SELECT id, role, content, engine, tier, confirmation_id, created_at FROM messages \
         WHERE conversation_id = $1 ORDER BY id",
        id,
    )
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
    extractive_of(user_messages.len(), user_messages)
}

/// The extractive summary of `requests` user messages of which `first` are
/// the first ones (150 words never need more than 150 of them).
pub fn extractive_of(requests: usize, first: &[String]) -> String {
    if requests == 0 {
        return "An empty conversation.".into();
    }
    let asked: Vec<String> = first
        .iter()
        .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    clamp_words(
        &format!(
            "{} request{}: {}",
            requests,
            if requests == 1 { "" } else { "s" },
            asked.join(" | ")
        ),
        SUMMARY_MAX_WORDS,
    )
}

/// Messages read at most for the model's summary.
pub const SUMMARY_MESSAGES: i64 = 100;

/// The transcript the model summarizes: `latest` (role, content), newest
/// first, as "role: content" lines oldest first, at most `max_chars`
/// characters in all (the oldest line kept is cut to fit).
pub fn bounded_transcript(latest: &[(String, String)], max_chars: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut left = max_chars;
    for (role, content) in latest {
        let sep = usize::from(!lines.is_empty());
        if left <= sep {
            break;
        }
        let line = format!("{role}: {content}");
        let n = line.chars().count();
        if n + sep <= left {
            left -= n + sep;
            lines.push(line);
        } else {
            lines.push(line.chars().take(left - sep).collect());
            break;
        }
    }
    lines.reverse();
    lines.join("\n")
}

/// Close a conversation of the caller's and write its summary.
pub async fn close(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Conversation> {
    // Claim it first (a concurrent close gets 409), summarize, then store.
    let now = state.clock.now();
    let claimed: Option<Uuid> = sqlx::query_scalar!(
        "UPDATE conversations SET closed_at = $3 WHERE id = $1 AND user_id = $2 AND closed_at IS NULL RETURNING id",
        id,
        caller.user_id() as UserId,
        now,
    )
    .fetch_optional(&state.pool)
    .await?;
    if claimed.is_none() {
        let exists: Option<i32> = sqlx::query_scalar!(
            r#"SELECT 1 AS "one!" FROM conversations WHERE id = $1 AND user_id = $2"#,
            id,
            caller.user_id() as UserId,
        )
        .fetch_optional(&state.pool)
        .await?;
        return Err(match exists {
            None => ApiError::NotFound,
            Some(_) => ApiError::conflict("this conversation is already closed"),
        });
    }
    let requests: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM messages WHERE conversation_id = $1 AND role = 'user'"#,
        id,
    )
    .fetch_one(&state.pool)
    .await?;
    let first: Vec<String> = sqlx::query_scalar!(
        "SELECT content FROM messages WHERE conversation_id = $1 AND role = 'user' ORDER BY id LIMIT $2",
        id,
        SUMMARY_MAX_WORDS as i64,
    )
    .fetch_all(&state.pool)
    .await?;
    let budget = state.agent.summary_input_chars;
    let latest: Vec<(String, String)> = sqlx::query!(
        r#"SELECT role, left(content, $3) AS "content!" FROM messages
            WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2"#,
        id,
        SUMMARY_MESSAGES,
        i32::try_from(budget).unwrap_or(i32::MAX),
    )
    .fetch_all(&state.pool)
    .await?
    .into_iter()
    .map(|r| (r.role, r.content))
    .collect();
    let transcript = bounded_transcript(&latest, budget);
    let summary = match paid_summary(state, caller, id, &transcript).await {
        Some(s) => clamp_words(&s, SUMMARY_MAX_WORDS),
        None => extractive_of(usize::try_from(requests).unwrap_or(0), &first),
    };
    Ok(sqlx::query_as!(
        Conversation,
        "UPDATE conversations SET summary = $2 WHERE id = $1 RETURNING id, summary, closed_at, created_at",
        id,
        summary,
    )
    .fetch_one(&state.pool)
    .await?)
}

/// The model's summary, paid with AI tokens like an answer: by the
/// organization that paid for the conversation's latest model-written reply,
/// else the caller's only organization. None (the extractive summary stands)
/// without a provider, without such an organization, when its allowance
/// refuses, when the provider fails, or when the spend is refused (nothing
/// model-written is kept unpaid). No connection is held while the model works.
async fn paid_summary(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    transcript: &str,
) -> Option<String> {
    if !state.provider() || transcript.is_empty() {
        return None;
    }
    let paid_before: Option<OrgId> = sqlx::query_scalar!(
        r#"SELECT org_id AS "org_id!: OrgId" FROM messages WHERE conversation_id = $1 AND org_id IS NOT NULL ORDER BY id DESC LIMIT 1"#,
        id,
    )
    .fetch_optional(&state.pool)
    .await
    .map_err(|e| tracing::warn!(error = %e, "cannot read who paid for the conversation"))
    .ok()?;
    let org = paid_before.or_else(|| billing::charged_org(caller, None))?;
    if let Err(e) = billing::check_allowance(&state.peers.org_billing, caller, org).await {
        tracing::info!(error = %e, "the summary cannot be paid for; the extractive one stands");
        return None;
    }
    let timeout = model::budget(state, caller.time_left())?;
    let instruction = format!(
        "Summarize this conversation between a user and the hub's assistant in at most {SUMMARY_MAX_WORDS} words. Plain text."
    );
    let c = model::compose(
        state,
        "conversation summary",
        &instruction,
        transcript,
        timeout,
    )
    .await?;
    match billing::spend(&state.peers.org_billing, caller, org, c.tokens).await {
        Ok(()) => Some(c.content),
        Err(e) => {
            tracing::info!(error = %e, "the summary was not paid for; the extractive one stands");
            None
        }
    }
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
        // From the first requests only, the same summary.
        let many: Vec<String> = (0..400).map(|i| format!("m{i}")).collect();
        assert_eq!(extractive_of(many.len(), &many[..150]), extractive(&many));
    }

    #[test]
    fn the_transcript_is_the_latest_messages_within_the_bound() {
        let newest_first: Vec<(String, String)> = (0..10)
            .rev()
            .map(|i| ("user".to_owned(), format!("m{i} {}", "x".repeat(100))))
            .collect();
        let t = bounded_transcript(&newest_first, 500);
        assert!(t.chars().count() <= 500, "{}", t.chars().count());
        assert!(t.ends_with(&format!("user: m9 {}", "x".repeat(100))), "{t}");
        // m5 is cut to fit; nothing older is there.
        assert!(t.starts_with("user: m5 x") && !t.contains("m4 "), "{t}");
        assert_eq!(bounded_transcript(&newest_first[..1], 7), "user: m");
        assert_eq!(bounded_transcript(&[], 10), "");
        let all = bounded_transcript(&newest_first, 100_000);
        assert!(all.starts_with("user: m0 ") && all.lines().count() == 10);
    }
}
