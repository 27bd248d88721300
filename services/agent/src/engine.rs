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
    billing, conversations,
    model::{self, Completion, ToolCall},
    ops::{Outcome, Staged, Tier},
    rules,
    settings::AgentSettings,
    state::AppState,
    tools::{self, Ctx},
};
use hub_domain::{ConversationId, OrgId, StagedActionId};
use serde::Serialize;
use serde_json::{json, Value};
use service_kit::{assertion::Caller, ApiError, ApiResult};
use std::time::Duration;

pub const RULES_ENGINE: &str = "rules";

#[derive(Debug, Serialize)]
pub struct AgentReply {
    pub reply: String,
    pub engine: String,
    pub notice: String,
    pub tier: Tier,
    pub conversation_id: ConversationId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_id: Option<StagedActionId>,
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
    /// An answer that staged nothing.
    fn said(reply: String, engine: String, notice: String, logged: bool) -> Answer {
        Answer {
            reply,
            engine,
            notice,
            staged: None,
            logged,
            paid_by: None,
        }
    }

    fn tier(&self) -> Tier {
        if self.staged.is_some() {
            Tier::ConfirmationRequired
        } else {
            Tier::FullOrLoggedAutonomy
        }
    }

    /// The engine's notice, and what the caller does next (confirm a staged
    /// action; nothing for a logged one).
    fn full_notice(&self, agent: &AgentSettings) -> String {
        let mut notice = self.notice.clone();
        if self.staged.is_some() {
            let mins = agent.confirm_ttl_secs / 60;
            push_sentence(
                &mut notice,
                &format!("Nothing happens until you confirm: POST /v1/agent/confirm with the confirmation_id within {mins} minutes, or reject it."),
            );
        } else if self.logged {
            push_sentence(&mut notice, "Done at once and recorded in your audit log.");
        }
        notice
    }

    fn from_outcome(outcome: Outcome, engine: String, notice: String) -> Answer {
        match outcome {
            Outcome::Answer(reply) => Answer::said(reply, engine, notice, false),
            Outcome::Logged(reply) => Answer::said(reply, engine, notice, true),
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
    conversation_id: Option<ConversationId>,
) -> ApiResult<AgentReply> {
    check_message(&state.agent, message)?;
    check_scope(caller, scope)?;
    if let Some(id) = conversation_id {
        conversations::require_open(state, caller, id).await?;
    }
    let ctx = Ctx::new(state, caller, scope);
    let answer = respond(state, &ctx, message, conversation_id).await?;
    let tier = answer.tier();
    let notice = answer.full_notice(&state.agent);
    let saved = conversations::record_exchange(
        state,
        caller,
        conversation_id,
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

/// 400 unless the message has 1 to `agent.max_message_chars` characters and
/// no NUL (Postgres text cannot hold one).
fn check_message(agent: &AgentSettings, message: &str) -> ApiResult<()> {
    if message.contains('\0') {
        return Err(ApiError::bad_request(
            "message must not contain NUL characters",
        ));
    }
    let chars = message.chars().count();
    if message.trim().is_empty() || chars > agent.max_message_chars {
        return Err(ApiError::BadRequest(format!(
            "message must be 1 to {} characters",
            agent.max_message_chars
        )));
    }
    Ok(())
}

/// 404 when the request is scoped to an organization the caller is not in
/// (as far as their assertion tells; staff may scope to any).
fn check_scope(caller: &Caller, scope: Option<OrgId>) -> ApiResult<()> {
    if let Some(org) = scope {
        if !caller.identity.staff
            && caller.identity.role_in(org).is_none()
            && !caller.memberships_truncated
        {
            return Err(ApiError::NotFound);
        }
    }
    Ok(())
}

/// The model's answer when it gives one, else the rules' (with a notice
/// saying why).
async fn respond(
    state: &AppState,
    ctx: &Ctx<'_>,
    message: &str,
    conversation: Option<ConversationId>,
) -> ApiResult<Answer> {
    match by_model(state, ctx, message, conversation).await? {
        Ok(answer) => Ok(answer),
        Err(notice) => with_rules(ctx, message, notice).await,
    }
}

/// The model's answer, paid by the organization it names; `Err` is the notice
/// when the rules answer instead (no provider, nobody to pay, the provider
/// failed).
async fn by_model(
    state: &AppState,
    ctx: &Ctx<'_>,
    message: &str,
    conversation: Option<ConversationId>,
) -> ApiResult<Result<Answer, String>> {
    if !state.provider() {
        return Ok(Err(
            "No model provider is configured; the rule-based matcher answered.".into(),
        ));
    }
    let Some(org) = billing::charged_org(ctx.caller, ctx.scope) else {
        return Ok(Err("Model-backed answers are paid with an organization's AI tokens: pass org_id (you belong to several organizations, or none). The rule-based matcher answered.".into()));
    };
    billing::check_allowance(&state.peers.org_billing, ctx.caller, org).await?;
    match with_model(state, ctx, org, message, conversation).await {
        Ok(a) => Ok(Ok(Answer {
            paid_by: Some(org),
            ..a
        })),
        Err(Fallback::Provider(e)) => {
            tracing::warn!(error = %e, "model provider failed; rules answer");
            Ok(Err(format!(
                "The model provider failed ({e}); the rule-based matcher answered."
            )))
        }
        Err(Fallback::Api(e)) => Err(e),
    }
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

/// The model's conversation with the tools: each round paid, then its tool
/// calls run; it ends with the model's text, a staged action, or after
/// `model.max_rounds` rounds with what the tools said.
async fn with_model(
    state: &AppState,
    ctx: &Ctx<'_>,
    org: OrgId,
    message: &str,
    conversation: Option<ConversationId>,
) -> Result<Answer, Fallback> {
    let caller = ctx.caller;
    let (name, mut messages) = opening(state, caller, message, conversation).await?;
    let engine = format!("model:{name}");
    let tools = model::tools(caller.identity.staff);
    let mut said: Vec<String> = Vec::new();
    let mut logged = false;
    for _ in 0..state.model.max_rounds.max(1) {
        let c = paid_round(state, caller, org, &name, &messages, &tools).await?;
        if c.tool_calls.is_empty() {
            let reply = if c.content.trim().is_empty() {
                said.join("\n")
            } else {
                c.content
            };
            return Ok(Answer::said(reply, engine, String::new(), logged));
        }
        messages.push(c.message.clone());
        for call in &c.tool_calls {
            let result = match tool_result(ctx, call).await? {
                ToolResult::Said(t) => t,
                ToolResult::Logged(t) => {
                    logged = true;
                    t
                }
                // The model never runs a sensitive action: it is staged and
                // the user decides.
                ToolResult::Staged(s) => {
                    return Ok(Answer::from_outcome(
                        Outcome::Staged(s),
                        engine,
                        String::new(),
                    ))
                }
            };
            said.push(result.clone());
            messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": result}));
        }
    }
    Ok(Answer::said(
        said.join("\n"),
        engine,
        "The model used all its tool rounds; these are the tools' answers.".into(),
        logged,
    ))
}

/// The model's name and its first messages: the system prompt (with the
/// user's memory), the conversation so far, the message. Three reads at once.
async fn opening(
    state: &AppState,
    caller: &Caller,
    message: &str,
    conversation: Option<ConversationId>,
) -> Result<(String, Vec<Value>), ApiError> {
    let history = async {
        match conversation {
            Some(id) => conversations::history(state, id, state.agent.history_messages).await,
            None => Ok(Vec::new()),
        }
    };
    let (name, (soul, memory), history) = tokio::try_join!(
        model::current(state),
        crate::memory::texts(state, caller.user_id()),
        history,
    )?;
    let mut messages =
        vec![json!({"role": "system", "content": system_prompt(caller, &soul, &memory)})];
    for (role, content) in history {
        messages.push(json!({"role": role, "content": content}));
    }
    messages.push(json!({"role": "user", "content": message}));
    Ok((name, messages))
}

/// One completion within the gateway's deadline (past it, the rules answer),
/// paid before anything it asks for runs.
async fn paid_round(
    state: &AppState,
    caller: &Caller,
    org: OrgId,
    name: &str,
    messages: &[Value],
    tools: &[Value],
) -> Result<Completion, Fallback> {
    let timeout = model::budget(state, caller.time_left()).ok_or(Fallback::Provider(
        model::ProviderError::Timeout(Duration::ZERO),
    ))?;
    let c = model::complete(state, name, messages, Some(tools), timeout)
        .await
        .map_err(Fallback::Provider)?;
    billing::spend(&state.peers.org_billing, caller, org, c.tokens).await?;
    Ok(c)
}

/// What one tool call gave the model.
enum ToolResult {
    Said(String),
    Logged(String),
    Staged(Staged),
}

/// Run the operation a tool call names (a call naming none is told so).
async fn tool_result(ctx: &Ctx<'_>, call: &ToolCall) -> ApiResult<ToolResult> {
    let Some(op) = model::op_of(call) else {
        return Ok(ToolResult::Said(format!(
            "There is no tool {:?} with those arguments.",
            call.name
        )));
    };
    Ok(match tools::run(ctx, &op).await? {
        Outcome::Answer(t) => ToolResult::Said(t),
        Outcome::Logged(t) => ToolResult::Logged(t),
        Outcome::Staged(s) => ToolResult::Staged(s),
    })
}
