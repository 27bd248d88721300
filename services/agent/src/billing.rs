//! AI tokens for model-written text: which organization pays, whether it may
//! ([`check_allowance`]) and the spend ([`spend`]), through org-billing's
//! internal routes with the caller's authority. Answers and conversation
//! summaries both pay here.

use crate::tools::{self, Reply};
use hub_domain::OrgId;
use reqwest::Method;
use serde_json::json;
use service_kit::{assertion::Caller, peer::Peer, ApiError, ApiResult};

/// The organization whose tokens pay: the request's, else the caller's only one.
pub fn charged_org(caller: &Caller, scope: Option<OrgId>) -> Option<OrgId> {
    scope.or(match caller.identity.memberships.as_slice() {
        [only] if !caller.memberships_truncated => Some(only.org_id),
        _ => None,
    })
}

/// Map org-billing's refusal of a spend or an allowance to the caller's error.
fn token_refusal(r: &Reply) -> ApiError {
    match (r.status, r.error()) {
        (402 | 403, Err(malformed)) => malformed,
        (402, Ok(m)) => ApiError::PaymentRequired(m.to_owned()),
        (403, Ok(m)) => ApiError::forbidden(m),
        (404, _) => ApiError::NotFound,
        (s, _) => ApiError::internal(anyhow::anyhow!("org-billing answered {s} about AI tokens")),
    }
}

/// Before the model runs: 403 when the organization is suspended (the model's
/// text spends its tokens: a write) or AI is disabled for the member, 402 when
/// the organization or the member's limit has nothing left.
pub async fn check_allowance(org_billing: &Peer, caller: &Caller, org: OrgId) -> ApiResult<()> {
    caller.require_writable(org)?;
    let path = format!("/internal/v1/organizations/{org}/ai-allowance");
    let r = tools::call(org_billing, caller, Method::GET, &path, None, None).await?;
    if !r.ok() {
        return Err(token_refusal(&r));
    }
    let allowance: event_contracts::views::AiAllowance = serde_json::from_value(r.body)
        .map_err(|e| ApiError::BadGateway(format!("unexpected answer from {path}: {e}")))?;
    if !allowance.ai_enabled {
        return Err(ApiError::forbidden(
            "AI is disabled for you in this organization",
        ));
    }
    if allowance.org_balance <= 0 {
        return Err(ApiError::PaymentRequired(
            "the organization has no AI tokens left".into(),
        ));
    }
    if allowance.available <= 0 {
        return Err(ApiError::PaymentRequired(
            "your personal AI-token limit in this organization is exhausted".into(),
        ));
    }
    Ok(())
}

/// Spend `tokens` of `org`'s AI tokens (and the member's limit) for the caller.
pub async fn spend(org_billing: &Peer, caller: &Caller, org: OrgId, tokens: i64) -> ApiResult<()> {
    let path = format!("/internal/v1/organizations/{org}/tokens/spend");
    let body = json!({"amount": tokens, "reason": "assistant"});
    let r = tools::call(org_billing, caller, Method::POST, &path, Some(&body), None).await?;
    if r.ok() {
        Ok(())
    } else {
        Err(token_refusal(&r))
    }
}
