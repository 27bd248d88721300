//! Logged autonomy: the job title and bio, set at once through identity's
//! public profile route and recorded in the caller's audit log.

use super::context::{call, refusal, Ctx};
use crate::ops::Outcome;
use reqwest::Method;
use serde_json::json;
use service_kit::ApiError;

/// Longest job title and bio the assistant sets (identity's own limits apply
/// too; bio: 2000 characters).
pub const JOB_TITLE_MAX: usize = 120;

/// A profile field the assistant sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    JobTitle,
    Bio,
}

impl Field {
    /// Its name in identity's profile (and in the audit event).
    fn key(self) -> &'static str {
        match self {
            Field::JobTitle => "job_title",
            Field::Bio => "bio",
        }
    }

    /// Its name to the user.
    fn label(self) -> &'static str {
        match self {
            Field::JobTitle => "job title",
            Field::Bio => "bio",
        }
    }
}

/// Set `field` to `text` (trimmed, unquoted), then audit it.
pub async fn set(ctx: &Ctx<'_>, field: Field, text: &str) -> Result<Outcome, ApiError> {
    let value = text.trim().trim_matches('"').trim();
    if field == Field::JobTitle && value.chars().count() > JOB_TITLE_MAX {
        return Ok(Outcome::Answer(format!(
            "A job title can be at most {JOB_TITLE_MAX} characters."
        )));
    }
    let r = call(
        &ctx.peers.identity,
        ctx.caller,
        Method::PATCH,
        "/v1/profile",
        Some(&json!({ field.key(): value })),
        None,
    )
    .await?;
    if !r.ok() {
        return refusal(&r);
    }
    ctx.audit.profile_updated(ctx.caller, field.key()).await?;
    Ok(Outcome::Logged(format!(
        "Your {} is now \"{value}\".",
        field.label()
    )))
}
