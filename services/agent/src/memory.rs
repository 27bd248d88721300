//! Memory documents: `soul_md` the user writes, `memory_md` the agent curates
//! from the user's activity.
//!
//! Activity is the audit events on NATS (`core.v1.audit.recorded`), consumed
//! durably; each is stored once by its event id, so a redelivery is a no-op.
//! Curation marks the user's unprocessed activity processed in one statement
//! and rewrites `memory_md`: a model-written summary when a provider is
//! configured and answers, otherwise a rule-based count of the user's
//! activity by action. It runs on demand (`POST /v1/memory/curate`) and on a
//! schedule: every `curation.interval_secs` each replica looks for users whose
//! local time (their profile timezone, from identity) is in the night window
//! (02:00-05:00) and claims each for that local date with a conditional
//! UPDATE, so a user is curated once per night however many replicas run.
//!
//! Curation is not charged (memory is the user's, not an organization's), so
//! the model writes a user's memory at most once per
//! `curation.model_interval_secs`, from a bounded input, and no database
//! connection is held while it does (see [`curate`]).

use crate::{model, state::AppState, store::memory as store};
use chrono::{TimeZone, Timelike};
use hub_domain::UserId;
use reqwest::Method;
use serde_json::json;
use service_kit::{peer::Peer, ApiError, ApiResult};
use std::collections::BTreeMap;
use time::OffsetDateTime;

pub use crate::store::memory::{store_activity, MemoryDoc};

pub const SOUL_MAX_CHARS: usize = 20_000;

/// The user's memory document (empty when they have none).
pub async fn get(state: &AppState, user: UserId) -> ApiResult<MemoryDoc> {
    Ok(store::doc(&state.pool, user).await?.unwrap_or(MemoryDoc {
        soul_md: String::new(),
        memory_md: String::new(),
        last_curated_at: None,
        curation_count: 0,
    }))
}

/// (soul_md, memory_md) for the model's context.
pub async fn texts(state: &AppState, user: UserId) -> sqlx::Result<(String, String)> {
    store::texts(&state.pool, user).await
}

/// Validate a soul: at most 20,000 characters (not bytes), no NUL.
pub fn validate_soul(soul: &str) -> ApiResult<()> {
    if soul.chars().count() > SOUL_MAX_CHARS {
        return Err(ApiError::BadRequest(format!(
            "soul_md must be at most {SOUL_MAX_CHARS} characters"
        )));
    }
    if soul.contains('\0') {
        return Err(ApiError::bad_request("soul_md must not contain NUL"));
    }
    Ok(())
}

/// Replace the user's soul (validated); their document as it now is.
pub async fn set_soul(state: &AppState, user: UserId, soul: &str) -> ApiResult<MemoryDoc> {
    validate_soul(soul)?;
    store::set_soul(&state.pool, user, soul).await?;
    get(state, user).await
}

/// The rule-based memory: the user's activity counted by action.
pub fn counted(counts: &[(String, i64)], now: OffsetDateTime) -> String {
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    let mut s = format!(
        "# Activity\nCurated {} (UTC): {total} recorded action{}.\n",
        now.date(),
        if total == 1 { "" } else { "s" }
    );
    for (action, n) in counts {
        s.push_str(&format!("- {action}: {n}\n"));
    }
    s
}

/// Actions named to the model at most (the most frequent; the others are
/// counted together).
pub const MODEL_ACTIONS: usize = 50;

/// Curate one user now: mark their new activity processed and rewrite
/// memory_md. Returns how many entries this run processed.
///
/// One short transaction marks, counts, advances the count and, when a
/// provider is configured and the user's model interval has passed, claims the
/// model's turn; the model then writes with no connection held, and its text
/// is stored only if no later turn was claimed meanwhile. Without a provider
/// the count is the memory; with one, curations between the model's turns
/// leave the memory as the model wrote it.
pub async fn curate(state: &AppState, user: UserId) -> ApiResult<i64> {
    let now = state.clock.now();
    let provider = state.provider();
    let interval = time::Duration::seconds(state.curation.model_interval_secs);
    let mut tx = state.pool.begin().await?;
    let Some(last_model) = store::lock_for_curation(&mut tx, user).await? else {
        return Ok(0); // erased meanwhile
    };
    let processed = store::mark_curated(&mut tx, user, now).await?;
    let counts = store::counts(&mut tx, user).await?;
    let model_turn = provider && last_model.is_none_or(|t| t <= now - interval);
    let rules = counted(&counts, now);
    let claim = store::advance(&mut tx, user, now, provider, &rules, model_turn).await?;
    tx.commit().await?;
    if model_turn {
        let memory = summarize(state, &counts).await.unwrap_or(rules);
        store::set_model_memory(&state.pool, user, &memory, claim).await?;
    }
    Ok(processed)
}

/// What the model is given: the most frequent actions, the rest summed.
pub fn model_input(counts: &[(String, i64)]) -> String {
    let mut listed: Vec<String> = counts
        .iter()
        .take(MODEL_ACTIONS)
        .map(|(a, n)| format!("{}: {n}", a.chars().take(100).collect::<String>()))
        .collect();
    let rest: i64 = counts.iter().skip(MODEL_ACTIONS).map(|(_, n)| n).sum();
    if rest > 0 {
        listed.push(format!("other actions: {rest}"));
    }
    listed.join("\n")
}

async fn summarize(state: &AppState, counts: &[(String, i64)]) -> Option<String> {
    model::write(
        state,
        "memory",
        "Write a short Markdown memory (at most 150 words) of this user's activity on the hub, from these counts of recorded actions. No personal data beyond what is given.",
        &model_input(counts),
    )
    .await
}

/// Is `now` inside the night window in `tz`, and which local date is it?
pub fn local_night(
    now: OffsetDateTime,
    tz: &str,
    start_hour: u32,
    end_hour: u32,
) -> Option<chrono::NaiveDate> {
    let tz: chrono_tz::Tz = tz.parse().ok()?;
    let utc = chrono::Utc
        .timestamp_opt(now.unix_timestamp(), 0)
        .single()?;
    let local = utc.with_timezone(&tz);
    (start_hour..end_hour)
        .contains(&local.hour())
        .then(|| local.date_naive())
}

/// Learn the candidates' timezones from identity (users with a memory doc or
/// uncurated activity), then curate each one whose night it is and who was not
/// curated this local night. Returns how many users were curated.
pub async fn scheduled_pass(state: &AppState) -> anyhow::Result<u64> {
    let users = store::curation_candidates(&state.pool, state.curation.batch_users).await?;
    if users.is_empty() {
        return Ok(0);
    }
    let zones = timezones(&state.peers.identity, &users).await?;
    let now = state.clock.now();
    let mut curated = 0;
    for user in users {
        let tz = zones.get(&user).map_or("UTC", String::as_str);
        store::set_timezone(&state.pool, user, tz).await?;
        let Some(night) = local_night(
            now,
            tz,
            state.curation.window_start_hour,
            state.curation.window_end_hour,
        ) else {
            continue;
        };
        // The claim: one replica wins each user's night.
        if store::claim_night(&state.pool, user, as_time_date(night)?).await? {
            curate(state, user)
                .await
                .map_err(|e| anyhow::anyhow!("curating {user}: {e}"))?;
            curated += 1;
        }
    }
    Ok(curated)
}

/// A chrono date as a `time` one.
fn as_time_date(d: chrono::NaiveDate) -> anyhow::Result<time::Date> {
    Ok(time::Date::parse(
        &d.format("%Y-%m-%d").to_string(),
        time::macros::format_description!("[year]-[month]-[day]"),
    )?)
}

/// The users' profile timezones, from identity (in batches of 1000).
async fn timezones(identity: &Peer, users: &[UserId]) -> anyhow::Result<BTreeMap<UserId, String>> {
    let mut out = BTreeMap::new();
    for chunk in users.chunks(1000) {
        let resp = identity
            .request(
                Method::POST,
                "/internal/v1/users/timezones",
                None,
                Some(&json!({ "user_ids": chunk })),
                None,
            )
            .await?;
        anyhow::ensure!(
            resp.status().is_success(),
            "identity answered {} to a timezone lookup",
            resp.status()
        );
        let body: serde_json::Value = resp.json().await?;
        out.extend(timezones_of(&body)?);
    }
    Ok(out)
}

/// identity's answer to a timezone lookup, `{timezones: {user_id: IANA
/// name}}` (a user it does not list has no timezone: UTC). An answer without
/// the map, or with anything else in it, is an error naming what is wrong.
fn timezones_of(body: &serde_json::Value) -> anyhow::Result<BTreeMap<UserId, String>> {
    let map = body["timezones"].as_object().ok_or_else(|| {
        anyhow::anyhow!("identity's timezone lookup answered without a timezones object")
    })?;
    map.iter()
        .map(|(k, v)| {
            let id = k.parse::<UserId>().map_err(|_| {
                anyhow::anyhow!(
                    "identity's timezone lookup answered a key that is not a user id: {k:?}"
                )
            })?;
            let tz = v.as_str().ok_or_else(|| {
                anyhow::anyhow!(
                    "identity's timezone lookup answered timezones.{k} that is not a string"
                )
            })?;
            Ok((id, tz.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_timezone_answer_without_its_map_is_an_error() {
        let user = UserId::new();
        let zones = timezones_of(&json!({"timezones": {user.to_string(): "Europe/Istanbul"}}))
            .expect("a map");
        assert_eq!(
            zones.get(&user).map(String::as_str),
            Some("Europe/Istanbul")
        );
        assert!(timezones_of(&json!({"timezones": {}}))
            .expect("empty")
            .is_empty());
        for bad in [
            json!({}),
            json!({"timezones": []}),
            json!({"timezones": {"nobody": "UTC"}}),
            json!({"timezones": {user.to_string(): null}}),
        ] {
            assert!(timezones_of(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn souls_are_counted_in_characters() {
        assert!(validate_soul(&"ş".repeat(SOUL_MAX_CHARS)).is_ok());
        assert!(validate_soul(&"ş".repeat(SOUL_MAX_CHARS + 1)).is_err());
        assert!(validate_soul("a\0b").is_err());
    }

    #[test]
    fn the_night_window_is_local() {
        let now = datetime!(2026-11-23 00:30 UTC);
        // Istanbul is UTC+3: 03:30 local.
        assert_eq!(
            local_night(now, "Europe/Istanbul", 2, 5).map(|d| d.to_string()),
            Some("2026-11-23".into())
        );
        assert_eq!(local_night(now, "UTC", 2, 5), None);
        // New York is UTC-5: 19:30 the day before.
        assert_eq!(local_night(now, "America/New_York", 2, 5), None);
        assert_eq!(local_night(now, "Not/AZone", 2, 5), None);
    }

    #[test]
    fn the_rule_based_memory_counts_by_action() {
        let m = counted(
            &[("tokens.spent".into(), 3), ("org.created".into(), 1)],
            datetime!(2026-11-23 03:00 UTC),
        );
        assert!(m.contains("4 recorded actions"), "{m}");
        assert!(m.contains("- tokens.spent: 3"));
    }

    #[test]
    fn the_model_is_given_a_bounded_list() {
        let many: Vec<(String, i64)> = (0..80).map(|i| (format!("a{i}"), 2)).collect();
        let input = model_input(&many);
        assert_eq!(input.lines().count(), MODEL_ACTIONS + 1, "{input}");
        assert!(input.ends_with("other actions: 60"), "{input}");
        assert_eq!(model_input(&many[..2]), "a0: 2\na1: 2");
    }
}
