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
    store::conversations as store,
};
use hub_domain::{ConversationId, OrgId, StagedActionId};
use service_kit::{assertion::Caller, ApiError, ApiResult};

pub use crate::store::conversations::{Conversation, Message};

pub const SUMMARY_MAX_WORDS: usize = 150;
pub const LIST_LIMIT: i64 = 100;

/// 404 unless the conversation is the caller's; 409 when it is closed.
pub async fn require_open(state: &AppState, caller: &Caller, id: ConversationId) -> ApiResult<()> {
    match store::closed_at(&state.pool, id, caller.user_id()).await? {
        None => Err(ApiError::NotFound),
        Some(Some(_)) => Err(ApiError::conflict(
            "this conversation is closed; start a new one",
        )),
        Some(None) => Ok(()),
    }
}

/// The last `n` messages of a conversation, oldest first, as (role, content).
pub async fn history(
    state: &AppState,
    id: ConversationId,
    n: i64,
) -> sqlx::Result<Vec<(String, String)>> {
    store::history(&state.pool, id, n).await
}

pub struct Saved {
    pub conversation_id: ConversationId,
    pub confirmation_id: Option<StagedActionId>,
}

/// Store one exchange (through the group commit of [`crate::journal`]): the
/// conversation (when new), the staged action (if any) and both messages.
#[allow(clippy::too_many_arguments)]
pub async fn record_exchange(
    state: &AppState,
    caller: &Caller,
    conversation: Option<ConversationId>,
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
            // Random (v4), as confirmation ids have always been.
            StagedActionId::from_uuid(uuid::Uuid::new_v4()),
            s.clone(),
            now + time::Duration::seconds(state.agent.confirm_ttl_secs),
        )
    });
    let confirmation_id = staged.as_ref().map(|s| s.0);
    let e = Exchange {
        user_id: caller.user_id(),
        continues: conversation,
        new_conversation: ConversationId::new(),
        message: message.to_owned(),
        reply: reply.to_owned(),
        engine: engine.to_owned(),
        tier,
        staged,
        paid_by,
        at: now,
    };
    let conversation_id = e.conversation_id();
    state.journal.record(e).await?;
    Ok(Saved {
        conversation_id,
        confirmation_id,
    })
}

/// The caller's conversations, newest first (at most [`LIST_LIMIT`]).
pub async fn list(state: &AppState, caller: &Caller) -> ApiResult<Vec<Conversation>> {
    Ok(store::list(&state.pool, caller.user_id(), LIST_LIMIT).await?)
}

/// The messages of a conversation of the caller's, oldest first.
pub async fn messages(
    state: &AppState,
    caller: &Caller,
    id: ConversationId,
) -> ApiResult<Vec<Message>> {
    if !store::is_users(&state.pool, id, caller.user_id()).await? {
        return Err(ApiError::NotFound);
    }
    Ok(store::messages(&state.pool, id).await?)
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
pub async fn close(
    state: &AppState,
    caller: &Caller,
    id: ConversationId,
) -> ApiResult<Conversation> {
    // Claim it first (a concurrent close gets 409), summarize, then store.
    claim_close(state, caller, id).await?;
    let summary = summarize(state, caller, id).await?;
    Ok(store::set_summary(&state.pool, id, &summary).await?)
}

/// Close it now: 404 unless it is the caller's, 409 when it is closed already.
async fn claim_close(state: &AppState, caller: &Caller, id: ConversationId) -> ApiResult<()> {
    let user = caller.user_id();
    if store::claim_close(&state.pool, id, user, state.clock.now()).await? {
        return Ok(());
    }
    Err(match store::is_users(&state.pool, id, user).await? {
        false => ApiError::NotFound,
        true => ApiError::conflict("this conversation is already closed"),
    })
}

/// The summary: the model's when it is written and paid for, else the
/// extractive one.
async fn summarize(state: &AppState, caller: &Caller, id: ConversationId) -> ApiResult<String> {
    let requests = store::request_count(&state.pool, id).await?;
    let first = store::first_requests(&state.pool, id, SUMMARY_MAX_WORDS as i64).await?;
    let budget = state.agent.summary_input_chars;
    let latest = store::latest_cut(
        &state.pool,
        id,
        SUMMARY_MESSAGES,
        i32::try_from(budget).unwrap_or(i32::MAX),
    )
    .await?;
    let transcript = bounded_transcript(&latest, budget);
    Ok(match paid_summary(state, caller, id, &transcript).await {
        Some(s) => clamp_words(&s, SUMMARY_MAX_WORDS),
        None => extractive_of(usize::try_from(requests).unwrap_or(0), &first),
    })
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
    id: ConversationId,
    transcript: &str,
) -> Option<String> {
    if !state.provider() || transcript.is_empty() {
        return None;
    }
    let paid_before: Option<OrgId> = store::last_payer(&state.pool, id)
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
