//! `POST /v1/agent`: one message in, one [`AgentReply`] out.
//!
//! With a model provider configured, the model answers (engine
//! `model:<name>`), calling the same operations as the rules; each round's
//! tokens are spent from the organization's AI tokens (and the member's
//! personal limit) through org-billing before that round's tool calls run, so
//! nothing runs unpaid. When no provider is configured, or it fails or times
//! out, the rule-based matcher answers (engine `rules`) and nothing is spent.
//! Either way a sensitive operation is only staged.

use crate::{
    conversations, model,
    ops::{Outcome, Staged, Tier},
    rules,
    state::AppState,
    tools::{self, Ctx},
};
use hub_domain::OrgId;
use reqwest::Method;
use serde::Serialize;
use serde_json::json;
use service_kit::{assertion::Caller, ApiError, ApiResult};
use std::time::Duration;
use uuid::Uuid;

pub const RULES_ENGINE: &str = "rules";

#[derive(Debug, Serialize)]
pub struct AgentReply {
    pub reply: String,
    pub engine: String,
    pub notice: String,
    pub tier: Tier,
    pub conversation_id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_summary: Option<String>,
}

/// What an engine produced, before it is stored.
struct Answer {
    reply: String,
    engine: String,
    notice: String,
    staged: Option<Staged>,
    logged: bool,
    /// The organization whose tokens paid for it (model-written answers).
    paid_by: Option<OrgId>,
}

impl Answer {
    fn from_outcome(outcome: Outcome, engine: String, notice: String) -> Answer {
        match outcome {
            Outcome::Answer(reply) => Answer {
                reply,
                engine,
                notice,
                staged: None,
                logged: false,
                paid_by: None,
            },
            Outcome::Logged(reply) => Answer {
                reply,
                engine,
                notice,
                staged: None,
                logged: true,
                paid_by: None,
            },
            Outcome::Staged(s) => Answer {
                reply: format!(
                    "I prepared this: {}. It runs only when you confirm it.",
                    s.summary
                ),
                engine,
                notice,
                staged: Some(s),
                logged: false,
                paid_by: None,
            },
        }
    }
}

/// Answer `message` for the caller.
pub async fn answer(
    state: &AppState,
    caller: &Caller,
    message: &str,
    scope: Option<OrgId>,
    conversation_id: Option<Uuid>,
) -> ApiResult<AgentReply> {
    let chars = message.chars().count();
    if message.trim().is_empty() || chars > state.agent.max_message_chars {
        return Err(ApiError::BadRequest(format!(
            "message must be 1 to {} characters",
            state.agent.max_message_chars
        )));
    }
    if let Some(org) = scope {
        if !caller.identity.staff
            && caller.identity.role_in(org).is_none()
            && !caller.memberships_truncated
        {
            return Err(ApiError::NotFound);
        }
    }
    let conversation = match conversation_id {
        Some(id) => {
            conversations::require_open(state, caller, id).await?;
            Some(id)
        }
        None => None,
    };
    let ctx = Ctx {
        state,
        caller,
        scope,
    };
    let mut answer = None;
    let mut notice = String::new();
    if state.provider() {
        match charged_org(caller, scope) {
            Some(org) => {
                check_allowance(state, caller, org).await?;
                match with_model(&ctx, org, message, conversation).await {
                    Ok(a) => {
                        answer = Some(Answer {
                            paid_by: Some(org),
                            ..a
                        })
                    }
                    Err(Fallback::Provider(e)) => {
                        tracing::warn!(error = %e, "model provider failed; rules answer");
                        notice = format!(
                            "The model provider failed ({e}); the rule-based matcher answered."
                        );
                    }
                    Err(Fallback::Api(e)) => return Err(e),
                }
            }
            None => {
                notice = "Model-backed answers are paid with an organization's AI tokens: pass org_id (you belong to several organizations, or none). The rule-based matcher answered.".into();
            }
        }
    } else {
        notice = "No model provider is configured; the rule-based matcher answered.".into();
    }
    let answer = match answer {
        Some(a) => a,
        None => with_rules(&ctx, message, notice).await?,
    };
    let tier = if answer.staged.is_some() {
        Tier::ConfirmationRequired
    } else {
        Tier::FullOrLoggedAutonomy
    };
    let mut notice = answer.notice;
    if answer.staged.is_some() {
        let mins = state.agent.confirm_ttl_secs / 60;
        push_sentence(
            &mut notice,
            &format!("Nothing happens until you confirm: POST /v1/agent/confirm with the confirmation_id within {mins} minutes, or reject it."),
        );
    } else if answer.logged {
        push_sentence(&mut notice, "Done at once and recorded in your audit log.");
    }
    let saved = conversations::record_exchange(
        state,
        caller,
        conversation,
        message,
        &answer.reply,
        &answer.engine,
        tier,
        answer.staged.as_ref(),
        answer.paid_by,
    )
    .await?;
    Ok(AgentReply {
        reply: answer.reply,
        engine: answer.engine,
        notice,
        tier,
        conversation_id: saved.conversation_id,
        action_summary: answer.staged.map(|s| s.summary),
        confirmation_id: saved.confirmation_id,
    })
}

fn push_sentence(notice: &mut String, s: &str) {
    if !notice.is_empty() {
        notice.push(' ');
    }
    notice.push_str(s);
}

async fn with_rules(ctx: &Ctx<'_>, message: &str, notice: String) -> ApiResult<Answer> {
    let outcome = match rules::parse(message) {
        Some(op) => tools::run(ctx, &op).await?,
        None => Outcome::Answer(rules::HELP.to_owned()),
    };
    Ok(Answer::from_outcome(outcome, RULES_ENGINE.into(), notice))
}

/// The organization whose tokens pay: the request's, else the caller's only one.
pub(crate) fn charged_org(caller: &Caller, scope: Option<OrgId>) -> Option<OrgId> {
    scope.or(match caller.identity.memberships.as_slice() {
        [only] if !caller.memberships_truncated => Some(only.org_id),
        _ => None,
    })
}

/// Map org-billing's refusal of a spend or an allowance to the caller's error.
fn token_refusal(r: &tools::Reply) -> ApiError {
    match r.status {
        402 => ApiError::PaymentRequired(r.error().to_owned()),
        403 => ApiError::forbidden(r.error()),
        404 => ApiError::NotFound,
        s => ApiError::internal(anyhow::anyhow!("org-billing answered {s} about AI tokens")),
    }
}

/// Before the model runs: 403 when AI is disabled for the member, 402 when the
/// organization or the member's limit has nothing left.
pub(crate) async fn check_allowance(
    state: &AppState,
    caller: &Caller,
    org: OrgId,
) -> ApiResult<()> {
    let path = format!("/internal/v1/organizations/{org}/ai-allowance");
    let r = tools::call(
        &state.peers.org_billing,
        caller,
        Method::GET,
        &path,
        None,
        None,
    )
    .await?;
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

pub(crate) async fn spend(
    state: &AppState,
    caller: &Caller,
    org: OrgId,
    tokens: i64,
) -> ApiResult<()> {
    let path = format!("/internal/v1/organizations/{org}/tokens/spend");
    let body = json!({"amount": tokens, "reason": "assistant"});
    let r = tools::call(
        &state.peers.org_billing,
        caller,
        Method::POST,
        &path,
        Some(&body),
        None,
    )
    .await?;
    if r.ok() {
        Ok(())
    } else {
        Err(token_refusal(&r))
    }
}

enum Fallback {
    /// The provider failed: the rules answer.
    Provider(model::ProviderError),
    /// Refused (tokens, a service down): the caller gets this error.
    Api(ApiError),
}

impl From<ApiError> for Fallback {
    fn from(e: ApiError) -> Self {
        Fallback::Api(e)
    }
}

fn system_prompt(caller: &Caller, soul: &str, memory: &str) -> String {
    format!(
        "You are the assistant of the hub where {name} <{email}> manages organizations, wallets, \
AI tokens, KYC, sessions and their profile. Answer briefly. Use the tools for facts and actions; \
never invent balances or ids. create_org, credit_wallet, grant_tokens and revoke_session are only \
prepared by their tools and run after the user confirms them. The user is {staff}staff.\n\n\
## The user's soul (their own words about themselves and their preferences)\n{soul}\n\n\
## What you remember of their activity\n{memory}\n",
        name = caller.identity.name,
        email = caller.identity.email,
        staff = if caller.identity.staff { "" } else { "not " },
        soul = if soul.is_empty() { "(empty)" } else { soul },
        memory = if memory.is_empty() {
            "(nothing yet)"
        } else {
            memory
        },
    )
}

async fn with_model(
    ctx: &Ctx<'_>,
    org: OrgId,
    message: &str,
    conversation: Option<Uuid>,
) -> Result<Answer, Fallback> {
    let state = ctx.state;
    let caller = ctx.caller;
    // The model, the user's memory and the conversation so far: three reads at once.
    let history = async {
        match conversation {
            Some(id) => conversations::history(state, id, state.agent.history_messages).await,
            None => Ok(Vec::new()),
        }
    };
    let (name, (soul, memory), history) = tokio::try_join!(
        model::current(state),
        crate::memory::texts(state, caller.user_id().as_uuid()),
        history,
    )
    .map_err(ApiError::from)?;
    let engine = format!("model:{name}");
    let mut messages =
        vec![json!({"role": "system", "content": system_prompt(caller, &soul, &memory)})];
    for (role, content) in history {
        messages.push(json!({"role": role, "content": content}));
    }
    messages.push(json!({"role": "user", "content": message}));
    let tools = model::tools(caller.identity.staff);
    let mut said: Vec<String> = Vec::new();
    let mut logged = false;
    for _ in 0..state.model.max_rounds.max(1) {
        // Every round within the gateway's deadline: past it, the rules answer.
        let timeout = model::budget(state, caller.time_left()).ok_or(Fallback::Provider(
            model::ProviderError::Timeout(Duration::ZERO),
        ))?;
        let c = model::complete(state, &name, &messages, Some(&tools), timeout)
            .await
            .map_err(Fallback::Provider)?;
        // Paid before anything it asks for runs.
        spend(state, caller, org, c.tokens).await?;
        if c.tool_calls.is_empty() {
            let reply = if c.content.trim().is_empty() {
                said.join("\n")
            } else {
                c.content
            };
            return Ok(Answer {
                reply,
                engine,
                notice: String::new(),
                staged: None,
                logged,
                paid_by: None,
            });
        }
        messages.push(c.message.clone());
        for call in &c.tool_calls {
            let result = match model::op_of(call) {
                None => format!("There is no tool {:?} with those arguments.", call.name),
                Some(op) => match tools::run(ctx, &op).await? {
                    Outcome::Staged(s) => {
                        // The model never runs a sensitive action: it is staged
                        // and the user decides.
                        return Ok(Answer::from_outcome(
                            Outcome::Staged(s),
                            engine,
                            String::new(),
                        ));
                    }
                    Outcome::Logged(t) => {
                        logged = true;
                        t
                    }
                    Outcome::Answer(t) => t,
                },
            };
            said.push(result.clone());
            messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": result}));
        }
    }
    Ok(Answer {
        reply: said.join("\n"),
        engine,
        notice: "The model used all its tool rounds; these are the tools' answers.".into(),
        staged: None,
        logged,
        paid_by: None,
    })
}
